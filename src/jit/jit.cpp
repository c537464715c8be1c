#include "tilecraft/jit/jit.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "disk_cache.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/jit/hash.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"
#include "tile/trace_params.cuh"

namespace tilecraft::jit {
namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

struct State {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> compiled;  // by memo string
  std::unordered_map<std::string, std::unique_ptr<Launchable>> loaded;             // by memo@device
  std::map<std::string, std::string> header_hash;                                  // closure hash per header
  std::vector<std::pair<int, const Launchable*>> traced;                           // (device, kernel), load order
};

constexpr size_t kTraceBytes = size_t(tc::kTraceCtas) * tc::kTraceSlots * 2 * sizeof(unsigned long long);

// TILECRAFT_CARVEOUT=N (0..100): every kernel loaded prefers N% of the
// unified L1 / shared memory as shared memory (a function attribute; ops
// that set their own afterwards keep theirs). For measuring what the SMs'
// reconfiguration between kernels of different preferences costs.
int carveout_override() {
  static const int v = [] {
    const char* e = std::getenv("TILECRAFT_CARVEOUT");
    if (!e || !*e) return -1;
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (*end || n < 0 || n > 100)
      throw Error(ErrorKind::kInvalidArgument,
                  std::string("environment: TILECRAFT_CARVEOUT: expected an integer percentage 0..100, got '") + e +
                      "'");
    return int(n);
  }();
  return v;
}

State& state() {
  static State s;
  return s;
}

// A cheap string that identifies (spec, options, arch) within this process.
std::string memo_string(const KernelSpec& spec, const CompileOptions& options, const std::string& arch) {
  std::string m = spec.header + "|" + spec.function;
  for (auto& a : spec.template_args) m += "|" + a;
  return m + "|" + options.str() + "|" + arch;
}

// Hash of the contents of every embedded header `path` includes, computed once.
std::string headers_hash(const std::string& path, const std::string& dir) {
  State& s = state();
  // Keyed by the text's address too: switching the kernel directory changes it.
  const EmbeddedSource* root = find_embedded(path, dir);
  const std::string memo = path + "@" + fmt::format("{}", static_cast<const void*>(root ? root->text : nullptr));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.header_hash.find(memo); it != s.header_hash.end()) return it->second;
  }
  Sha256 h;
  for (const EmbeddedSource* src : include_closure(path, dir)) h.field(src->path).field(src->text);
  std::string hex = h.hex();
  std::lock_guard<std::mutex> lock(s.mu);
  s.header_hash[memo] = hex;
  return hex;
}

void dump(const CompiledKernel& k) {
  const char* dir = std::getenv("TILECRAFT_DUMP_DIR");
  if (!dir || !*dir) return;
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::string base = fmt::format("{}/{}_{}", dir, k.spec.short_name(), k.key.substr(0, 12));
  std::ofstream(base + ".cu") << k.spec.generated_source();
  std::ofstream(base + ".log") << k.log;
  std::ofstream(base + ".cubin", std::ios::binary).write(k.cubin.data(), std::streamsize(k.cubin.size()));
  try {
    std::string ptx_arch = k.arch;
    ptx_arch.replace(0, 2, "compute");
    std::ofstream(base + ".ptx") << nvrtc_compile(k.spec, k.options, ptx_arch).binary;
  } catch (const std::exception& e) {
    std::ofstream(base + ".ptx") << "// PTX not produced: " << e.what() << "\n";
  }
}

}  // namespace

std::string cache_dir() {
  if (const char* d = std::getenv("TILECRAFT_CACHE_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/tilecraft";
}

bool disk_cache_enabled() { return !env_flag("TILECRAFT_DISABLE_CACHE"); }

std::string cache_key(const KernelSpec& spec, const CompileOptions& options, const std::string& arch) {
  Sha256 h;
  h.field("tilecraft-jit-key-v1").field(TILECRAFT_VERSION).field(nvrtc_version());
  h.field(spec.function).field(std::to_string(spec.template_args.size()));
  for (auto& a : spec.template_args) h.field(a);
  h.field(spec.generated_source()).field(headers_hash(spec.header, options.kernel_dir));
  for (auto& f : options.flags()) h.field(f);
  h.field(arch);
  return h.hex();
}

std::shared_ptr<const CompiledKernel> compile(const KernelSpec& spec, const CompileOptions& options,
                                              const std::string& arch) {
  State& s = state();
  const std::string memo = memo_string(spec, options, arch);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.compiled.find(memo); it != s.compiled.end()) return it->second;
  }
  const bool log = env_flag("TILECRAFT_JIT_LOG");
  std::string key = cache_key(spec, options, arch);
  std::optional<CompiledKernel> k;
  if (disk_cache_enabled()) k = disk::load(key);
  if (k) {
    if (log) std::cerr << fmt::format("[tilecraft jit] disk hit {} {} [{}] {}\n", spec.name_expression(), arch,
                                      options.str(), key.substr(0, 12));
  } else {
    CompileOutput out = nvrtc_compile(spec, options, arch);
    k.emplace();
    k->key = key;
    k->cubin = std::move(out.binary);
    k->lowered_name = out.lowered_name;
    k->resources = out.resources;
    k->compile_ms = out.compile_ms;
    k->log = out.log;
    k->arch = arch;
    if (log) std::cerr << fmt::format("[tilecraft jit] compiled {} {} [{}] in {:.1f} ms ({} regs, {} B spill)\n",
                                      spec.name_expression(), arch, options.str(), out.compile_ms,
                                      out.resources.registers, out.resources.spill_store_bytes);
  }
  k->spec = spec;
  k->options = options;
  if (!k->disk_hit) {
    if (disk_cache_enabled()) disk::store(*k);
    dump(*k);
  }
  auto ptr = std::make_shared<const CompiledKernel>(std::move(*k));
  std::lock_guard<std::mutex> lock(s.mu);
  return s.compiled.emplace(memo, ptr).first->second;
}

const Launchable& get_kernel(const KernelSpec& spec, int device) {
  static const CompileOptions defaults{};
  return get_kernel(spec, defaults, device);
}

const Launchable& get_kernel(const KernelSpec& spec, const CompileOptions& options, int device) {
  rt::ensure_context(device);
  const std::string arch = rt::device_info(device).arch();
  State& s = state();
  const std::string memo = memo_string(spec, options, arch) + "@" + std::to_string(device);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.loaded.find(memo); it != s.loaded.end()) return *it->second;
  }
  auto compiled = compile(spec, options, arch);
  auto l = std::make_unique<Launchable>();
  l->compiled = compiled;
  CUmodule mod;
  TC_DRV(cuModuleLoadData, &mod, compiled->cubin.data());
  TC_DRV(cuModuleGetFunction, &l->fn, mod, compiled->lowered_name.c_str());
  if (const int c = carveout_override(); c >= 0)
    TC_DRV(cuFuncSetAttribute, l->fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, c);
  l->dependent = spec.waits_for_previous_grid && rt::device_info(device).cc_major >= 9;
  if (options.trace) {
    // Only kernels that include tile/trace.cuh (and so stamp) have the buffer.
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
    if (rt::driver().cuModuleGetGlobal(&ptr, &bytes, mod, "tc_trace_stamps") == CUDA_SUCCESS &&
        bytes == kTraceBytes) {
      TC_DRV(cuMemsetD8, ptr, 0, bytes);
      l->trace_stamps = ptr;
    }
  }
  std::lock_guard<std::mutex> lock(s.mu);
  // Modules stay loaded for the process: Launchables are handed out by reference.
  const Launchable& out = *s.loaded.emplace(memo, std::move(l)).first->second;
  if (out.trace_stamps) s.traced.emplace_back(device, &out);
  return out;
}

static std::atomic<bool>& dependent_launch_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("TILECRAFT_PDL");
    return !(v && std::string(v) == "0");
  }()};
  return on;
}

bool dependent_launch_enabled() { return dependent_launch_flag().load(std::memory_order_relaxed); }
void set_dependent_launch(bool on) { dependent_launch_flag().store(on, std::memory_order_relaxed); }

void launch(const Launchable& k, unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned smem_bytes,
            CUstream stream, void* params, unsigned grid_z, unsigned cluster_x) {
  void* args[] = {params};
  const bool dependent = k.dependent && dependent_launch_enabled();
  if (!dependent && cluster_x <= 1) {
    TC_DRV(cuLaunchKernel, k.fn, grid_x, grid_y, grid_z, block_x, 1, 1, smem_bytes, stream, args, nullptr);
    return;
  }
  // Dependent: the kernel may be scheduled once every CTA of the previous
  // kernel has started (they allow it at once); its griddepcontrol.wait
  // holds it until that kernel has finished and its writes are visible.
  // Works under graph capture (a programmatic edge) and degrades to a plain
  // dependency after a non-kernel node or a kernel that never allows it.
  CUlaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (dependent) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = cluster_x, attrs[n].value.clusterDim.y = 1, attrs[n].value.clusterDim.z = 1;
    ++n;
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid_x, cfg.gridDimY = grid_y, cfg.gridDimZ = grid_z;
  cfg.blockDimX = block_x, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem_bytes;
  cfg.hStream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  TC_DRV(cuLaunchKernelEx, &cfg, k.fn, args, nullptr);
}

namespace {
// compute() for `key`, asked once per key and remembered (the occupancy
// queries run on every launch of the kernels that size their grids by them).
template <typename Key, typename F>
int remembered(std::mutex& mu, std::map<Key, int>& known, const Key& key, F compute) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  const int value = compute();
  std::lock_guard<std::mutex> lock(mu);
  known[key] = value;
  return value;
}
}  // namespace

int max_active_blocks(const Launchable& k, unsigned block_x, unsigned smem_bytes) {
  static std::mutex mu;
  static std::map<std::tuple<CUfunction, unsigned, unsigned>, int> known;
  return remembered(mu, known, std::make_tuple(k.fn, block_x, smem_bytes), [&] {
    int blocks = 0;
    TC_DRV(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, k.fn, int(block_x), size_t(smem_bytes));
    return std::max(blocks, 1);
  });
}

int max_active_clusters(const Launchable& k, unsigned block_x, unsigned smem_bytes, unsigned cluster_x) {
  static std::mutex mu;
  static std::map<std::tuple<CUfunction, unsigned, unsigned, unsigned>, int> known;
  return remembered(mu, known, std::make_tuple(k.fn, block_x, smem_bytes, cluster_x), [&] {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster_x, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg{};
    cfg.gridDimX = cluster_x, cfg.gridDimY = 1, cfg.gridDimZ = 1;  // one cluster: the grid must hold whole ones
    cfg.blockDimX = block_x, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = smem_bytes;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    TC_DRV(cuOccupancyMaxActiveClusters, &clusters, k.fn, &cfg);
    return std::max(clusters, 1);
  });
}

std::vector<KernelTrace> take_traces(int device) {
  State& s = state();
  std::vector<const Launchable*> mine;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [dev, k] : s.traced)
      if (dev == device) mine.push_back(k);
  }
  std::vector<KernelTrace> out;
  if (mine.empty()) return out;
  rt::ensure_context(device);
  TC_DRV(cuCtxSynchronize);
  for (const Launchable* k : mine) {
    KernelTrace t;
    t.function = k->compiled->spec.name_expression();
    t.config = k->compiled->spec.config;
    t.ctas = tc::kTraceCtas, t.slots = tc::kTraceSlots;
    // (time, launch << 10 | SM) pairs: kernels/tile/trace.cuh
    std::vector<unsigned long long> raw(kTraceBytes / sizeof(unsigned long long));
    TC_DRV(cuMemcpyDtoH, raw.data(), k->trace_stamps, kTraceBytes);
    const size_t n = raw.size() / 2;
    t.stamps.resize(n), t.grids.resize(n), t.sms.resize(n);
    for (size_t i = 0; i < n; ++i)
      t.stamps[i] = raw[2 * i], t.grids[i] = raw[2 * i + 1] >> 10, t.sms[i] = int(raw[2 * i + 1] & 1023u);
    if (std::any_of(t.stamps.begin(), t.stamps.end(), [](unsigned long long v) { return v != 0; })) {
      TC_DRV(cuMemsetD8, k->trace_stamps, 0, kTraceBytes);
      out.push_back(std::move(t));
    }
  }
  return out;
}

void clear_memory_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.compiled.clear();
  // Loaded modules are kept (references may be held); only compile memo is dropped.
}

}  // namespace tilecraft::jit
