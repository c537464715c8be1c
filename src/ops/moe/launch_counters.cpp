#include "ops/moe/launch_counters.h"

#include <map>
#include <mutex>
#include <string>

#include "tilecraft/error.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {

unsigned CounterPairSlots::next(bool capturing, const char* op, unsigned pairs) {
  TC_CHECK_ARG(pairs >= 1 && pairs <= kMaxBlockPairs, op, "counters",
               "1 .. " + std::to_string(kMaxBlockPairs) + " counter pairs per launch", std::to_string(pairs));
  if (!capturing) {
    // A block never wraps: it starts over at pair 0 instead.
    if (eager_ % kEagerPairs + pairs > kEagerPairs) eager_ += kEagerPairs - eager_ % kEagerPairs;
    const unsigned first = eager_ % kEagerPairs;
    eager_ += pairs;
    return first;
  }
  TC_CHECK_ARG(captured_ + pairs <= kCapturedPairs, op, "stream",
               "at most " + std::to_string(kCapturedPairs) +
                   " counter pairs recorded into CUDA graphs per device and process (each launch keeps its own "
                   "counters)",
               std::to_string(pairs) + " more, while capturing, with " +
                   std::to_string(kCapturedPairs - captured_) + " left");
  const unsigned first = kEagerPairs + captured_;
  captured_ += pairs;
  return first;
}

unsigned* launch_counter_pair(int device, CUstream stream, const char* op) {
  return launch_counters(device, stream, op, 1);
}

unsigned* launch_counters(int device, CUstream stream, const char* op, unsigned pairs) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  TC_DRV(cuStreamIsCapturing, stream, &status);
  struct Buffer {
    CUdeviceptr base = 0;
    CounterPairSlots slots;
  };
  static std::mutex mu;
  static std::map<int, Buffer> per_device;
  std::lock_guard<std::mutex> lock(mu);
  Buffer& b = per_device[device];
  if (!b.base) {
    const size_t bytes = size_t(CounterPairSlots::kPairs) * 2 * sizeof(unsigned);
    rt::ensure_context(device);
    TC_DRV(cuMemAlloc, &b.base, bytes);
    TC_DRV(cuMemsetD8, b.base, 0, bytes);
  }
  const unsigned slot = b.slots.next(status == CU_STREAM_CAPTURE_STATUS_ACTIVE, op, pairs);
  return reinterpret_cast<unsigned*>(b.base) + 2 * size_t(slot);
}

}  // namespace tilecraft::ops
