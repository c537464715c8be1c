#pragma once
// Selecting cases from the manifest, and running one case for correctness or
// for timing. Each run returns one JSON record (the JSONL line).
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/env.h"
#include "tilecraft/harness/manifest.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/timing.h"

namespace tilecraft::harness {

struct Selection {
  std::string op, variant, workload, tag;  // empty = any (tag: the op's default tags)
  std::vector<std::string> shapes;         // --shape: ad-hoc workloads of the selected op
  uint64_t seed = 20261129;
};

// Cases in manifest order. Ad-hoc workloads are stored in `storage` (cases
// point into it). Throws naming the filter when it matches nothing.
std::vector<Case> select_cases(const Manifest& m, const Selection& s, std::deque<WorkloadSpec>& storage);

// Throws (naming the op, the workload, the tensor and its size) where one of
// the case's tensors whose shape the planning symbols give would not fit
// the memory it lives in (the GPU's for CUDA cases, the host's otherwise),
// or all of them together, or an element count would overflow. run_correctness and run_bench call it
// before generating anything; `device` is the GPU of CUDA cases.
void check_case_fits(const Case& c, DeviceType backend, int device = 0);
// The case's symbols before any data exists: the workload's, plus the op's
// estimates of its derived symbols (manifest `estimates`).
std::map<std::string, double> planning_symbols(const Case& c);
// Where the CPU backend stands in for a missing GPU (no --backend cpu asked
// for): throws, naming the case and its work, when its variant's flops
// (planning_symbols) pass kCpuStandInFlops or its tensors kCpuStandInBytes
// (the host generates and checks them all: a DeepSeek-V3 layer's weights
// alone are 22 GB): such cases would run for many minutes to hours (model and
// race shapes) instead of testing anything soon. --backend cpu runs them
// anyway.
inline constexpr double kCpuStandInFlops = 5e10;
inline constexpr double kCpuStandInBytes = 4e9;
void check_cpu_stand_in_work(const Case& c);
// This machine's physical memory in bytes (the host limit check_case_fits and
// the adapters' own host-memory checks use).
double host_memory_bytes();

nlohmann::json run_correctness(const Case& c, DeviceType backend, const RunOptions& o, const EnvInfo& env);

// One other side of a bench A/B in one process.
struct VsSide {
  std::map<std::string, int> config;  // overrides over RunOptions::config
  std::string kernel_dir;             // non-empty: its kernels compile from this directory's headers
  std::string suffix;                 // its lines are NAME + suffix (vs_suffix)
};

struct BenchContext {
  TimingSettings timing;
  const Ceilings* ceilings = nullptr;  // GPU only
  L2Flusher* flusher = nullptr;
  bool host_overhead = true;           // also time the host side of a cached call
  double empty_launch_us = 0;          // measured at the start of this run, same protocol
  double bare_launch_host_us = 0;      // host cost of one cuLaunchKernel of an empty kernel
  bool same_size_copy = true;          // also time a copy of the same bytes (GPU)
  std::vector<std::string> scopes;     // time only these of the op's scopes (empty: all); others are an error
  double energy_ms = 0;                // > 0: also each timed scope's energy per call, alone for this long (energy.h)
  // The other sides of an A/B in one process (bench --vs-config /
  // --vs-kernels): the case runs once more per side, under that side's
  // config overrides (over RunOptions::config) and kernel headers, its main
  // line and scopes timed in the same rounds as the first run's (named
  // NAME + the side's suffix, judged against NAME) and its output verified
  // too: an A/B (or A/B/C...) that every side sees under one clock and
  // power state.
  std::vector<VsSide> vs;
};
// Host time per call of `call` (which enqueues on `stream`), median of
// batches; `gpu_ms_per_call` (its measured GPU time, 0 = small) shortens the
// batches of long calls.
double host_us_per_call(const std::function<void()>& call, CUstream stream, double gpu_ms_per_call = 0);

nlohmann::json run_bench(const Case& c, DeviceType backend, const RunOptions& o, const BenchContext& ctx,
                         const EnvInfo& env);

}  // namespace tilecraft::harness
