#pragma once
// Device counters for kernels that coordinate their blocks through global
// atomics (the dynamic tile scheduler, the last-block step of the fused gate
// + mapping kernel).
#include <cuda.h>

namespace tilecraft::ops {

// Which pair of the per-device counter buffer a launch gets. Plain launches
// rotate over the first kEagerPairs, so a pair is reused only that many
// launches later (long finished; the one hazard is that many such launches
// in flight at once). A launch recorded into a CUDA graph (stream capture)
// gets a pair of its own from the rest, never handed out again: the graph
// may be replayed at any time, next to any eager launches, and each replay
// leaves its pairs zeroed for the next. Not thread-safe (the caller locks).
class CounterPairSlots {
 public:
  static constexpr unsigned kEagerPairs = 4096;
  static constexpr unsigned kCapturedPairs = 65536;
  static constexpr unsigned kPairs = kEagerPairs + kCapturedPairs;
  // The first of `pairs` consecutive pairs (1 .. kMaxBlockPairs). Throws,
  // naming `op`, once captures have taken every captured pair.
  unsigned next(bool capturing, const char* op, unsigned pairs = 1);
  static constexpr unsigned kMaxBlockPairs = 512;

 private:
  unsigned eager_ = 0, captured_ = 0;
};

// A pair of unsigned counters on `device` that read 0, for one launch on
// `stream`; the kernel using it must leave both at 0 when it finishes. The
// first call on a device allocates and zeroes the buffer synchronously, so it
// must not happen inside a stream capture that forbids allocation (run the op
// once before capturing it).
unsigned* launch_counter_pair(int device, CUstream stream, const char* op);

// The same for 2 * `pairs` consecutive counters (a kernel whose blocks each
// keep a flag, e.g. decode_split = 2); pairs <= CounterPairSlots::kMaxBlockPairs.
unsigned* launch_counters(int device, CUstream stream, const char* op, unsigned pairs);

}  // namespace tilecraft::ops
