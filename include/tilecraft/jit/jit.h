#pragma once
// The JIT: KernelSpec + options + arch -> cache key -> (memory | disk | NVRTC)
// -> cubin -> module -> CUfunction. The only road to the GPU.
//
// Environment (also in README):
//   TILECRAFT_CACHE_DIR      disk cache root (default ~/.cache/tilecraft)
//   TILECRAFT_DISABLE_CACHE  1: never read or write the disk cache
//   TILECRAFT_JIT_LOG        1: print each compile / cache hit with options and time
//   TILECRAFT_DUMP_DIR       write source, PTX, cubin and log of every compile
//   TILECRAFT_PDL            0: launch every kernel plainly (no programmatic dependent launch)
#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"

namespace tilecraft::jit {

struct CompiledKernel {
  std::string key;  // sha256 of everything that changes the binary
  KernelSpec spec;
  CompileOptions options;
  std::string arch;
  std::string cubin;
  std::string lowered_name;
  Resources resources;
  double compile_ms = 0;  // time of the original compile (also on a hit)
  bool disk_hit = false;  // loaded from the disk cache rather than compiled
  std::string log;
};

struct Launchable {
  CUfunction fn = nullptr;
  // sm_90+ and the spec waits for the previous grid: launched so that it may
  // start (its CTAs resident, prologue done) while the previous kernel drains.
  bool dependent = false;
  std::shared_ptr<const CompiledKernel> compiled;
  // Compiled with CompileOptions::trace and holding stamps: the module's
  // tc_trace_stamps buffer (zeroed at load), else 0.
  CUdeviceptr trace_stamps = 0;
};

// One traced kernel's stamps (CompileOptions::trace, kernels/tile/trace.cuh):
// stamps[cta * slots + slot], %globaltimer in ns, 0 where never stamped;
// the last launch of each CTA index.
struct KernelTrace {
  std::string function;  // the spec's name expression
  std::string config;    // the spec's config label
  int ctas = 0, slots = 0;
  std::vector<unsigned long long> stamps;  // [cta][slot]: %globaltimer in ns, 0 = not stamped
  std::vector<unsigned long long> grids;   // [cta][slot]: the launch (%gridid) that stamped it; empty = one launch
  std::vector<int> sms;                     // [cta][slot]: the SM (%smid) it ran on; empty = unknown
};

std::string cache_dir();
bool disk_cache_enabled();

// The cache key. Covers: kernel function, template arguments, generated
// source, every embedded header the kernel includes (by content), compile
// flags, arch, NVRTC version, tilecraft version.
std::string cache_key(const KernelSpec& spec, const CompileOptions& options, const std::string& arch);

// Compiles (or finds in memory / on disk) one kernel for `arch`. Thread-safe;
// safe with other processes sharing the cache directory.
std::shared_ptr<const CompiledKernel> compile(const KernelSpec& spec, const CompileOptions& options,
                                              const std::string& arch);

// Compiles for the device's arch and loads it into the device's primary context.
// The returned reference stays valid for the life of the process.
const Launchable& get_kernel(const KernelSpec& spec, const CompileOptions& options, int device = 0);
// The same with default compile options (the harness's own kernels). Callers
// pass no temporary, so g++ 13's -Wdangling-reference has nothing to flag on
// the returned reference.
const Launchable& get_kernel(const KernelSpec& spec, int device);

// Launches with a single by-value parameter struct (every tilecraft kernel
// takes exactly one `Params` argument). cluster_x > 1: thread-block clusters
// of cluster_x CTAs along x (grid_x a multiple of it; sm_90+).
void launch(const Launchable& k, unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned smem_bytes,
            CUstream stream, void* params, unsigned grid_z = 1, unsigned cluster_x = 1);

// Clusters of cluster_x CTAs (block_x threads, smem_bytes of dynamic shared
// memory each) that can be resident at once on k's device (at least 1).
int max_active_clusters(const Launchable& k, unsigned block_x, unsigned smem_bytes, unsigned cluster_x);

// CTAs of k (block_x threads, smem_bytes of dynamic shared memory) that can
// be resident at once on one SM of k's device (at least 1).
int max_active_blocks(const Launchable& k, unsigned block_x, unsigned smem_bytes);

// Programmatic dependent launch of the kernels that allow it (default on;
// TILECRAFT_PDL=0 starts the process with it off). Results are the same
// either way; tests compare the two, benchmarks measure the difference.
bool dependent_launch_enabled();
void set_dependent_launch(bool on);

// Drops the in-memory maps (tests use this to observe the disk cache).
void clear_memory_cache();

// The stamps of every traced kernel loaded on `device` that recorded any
// since the last call, in load order; their buffers are zeroed after
// reading. Synchronises the device.
std::vector<KernelTrace> take_traces(int device = 0);

}  // namespace tilecraft::jit
