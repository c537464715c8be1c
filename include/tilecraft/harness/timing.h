#pragma once
// The one benchmark protocol: warmup (a count of rounds and a minimum GPU
// time), then repeats (optionally several trials), each iteration preceded
// by an L2 flush unless hot, CUDA events around each timed iteration.
#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilecraft/tensor.h"

namespace tilecraft::harness {

struct TimingSettings {
  int warmup = 10, repeat = 100, trials = 1;
  // Warmup rounds go on past `warmup` until this much GPU time has passed
  // since the first: a few rounds of microsecond kernels last under a
  // millisecond, too short for whatever state an idle GPU was in (clocks,
  // power) to settle before the timed rounds.
  double warmup_ms = 25;
  bool hot = false;             // no flush
  std::string flush = "read";   // read (two passes: evict_last lines go too) | plain (one read) | write (memset, as do_bench)
};

struct TimingStats {
  std::vector<double> samples_ms;
  double mean = 0, median = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0, std = 0;
  nlohmann::json to_json_us() const;  // all in microseconds
};

TimingStats summarize(std::vector<double> samples_ms);

// Evicts L2 by streaming a buffer of >= 2x L2: read (a pass whose lines are
// marked evict_last, so that lines an earlier kernel marked so go too, then
// the buffer's lines set back to normal priority), plain (one normal read,
// as before session 31; evict_last lines survive it) or write (memset).
class L2Flusher {
 public:
  explicit L2Flusher(int device = 0);
  void flush(CUstream stream, const std::string& mode);

 private:
  DeviceTensor buf_;
  DeviceTensor sink_;
};

TimingStats time_cuda(const std::function<void(CUstream)>& fn, CUstream stream, const TimingSettings& s,
                      L2Flusher* flusher);

// Several functions timed in rounds: every repeat runs each of them once, in
// order, each after its own flush, so all see the same clock and thermal
// state (timed one after another, parts of a long layer read slower than
// the whole they belong to: the GPU had warmed up meanwhile). Errors of
// fns[0] propagate; a later function that throws is dropped from the rounds
// and its message kept in `errors` (its stats then stay empty).
struct InterleavedTimings {
  std::vector<TimingStats> stats;
  std::vector<std::string> errors;  // per function; empty = timed
};
InterleavedTimings time_cuda_interleaved(const std::vector<std::function<void(CUstream)>>& fns, CUstream stream,
                                         const TimingSettings& s, L2Flusher* flusher);
TimingStats time_cpu(const std::function<void()>& fn, const TimingSettings& s);

}  // namespace tilecraft::harness
