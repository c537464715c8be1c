#include "tilecraft/runtime/driver.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "tilecraft/error.h"

namespace tilecraft::rt {
namespace {

#define TC_STR2(x) #x
#define TC_STR(x) TC_STR2(x)  // expands cuda.h's version macros before quoting

struct Loaded {
  DriverApi api;
  bool ok = false;
  int device_count = 0;
  std::string reason;
};

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.reason = "the CUDA driver library (libcuda.so.1) was not found: no NVIDIA driver on this machine";
    return l;
  }
#define TC_DRIVER_FN(name)                                                               \
  l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, TC_STR(name)));            \
  if (!l.api.name) {                                                                     \
    l.reason = std::string("the CUDA driver lacks entry point ") + TC_STR(name) +        \
               " (driver too old for CUDA 13?)";                                         \
    return l;                                                                            \
  }
#include "tilecraft/runtime/driver_functions.inc"
#undef TC_DRIVER_FN
  CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.api.cuGetErrorName(r, &name);
    l.reason = std::string("cuInit failed with ") + (name ? name : "?") + ": no usable CUDA device";
    return l;
  }
  int count = 0;
  if (l.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    l.reason = "the CUDA driver reports no CUDA device";
    return l;
  }
  l.device_count = count;
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();  // thread-safe, once
  return l;
}

}  // namespace

bool driver_available() { return loaded().ok; }

std::string driver_unavailable_reason() { return loaded().ok ? "" : loaded().reason; }

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.ok) throw Error(ErrorKind::kNoDevice, "no CUDA device: " + l.reason);
  return l.api;
}

int device_count() {
  driver();  // throws Error(kNoDevice), with the reason, where there is none
  return loaded().device_count;
}

void check_ordinal(int ordinal, const std::string& op, const std::string& arg) {
  if (!driver_available())
    throw Error(ErrorKind::kNoDevice, fmt::format("{}: argument '{}': expected a CUDA device, got {}, but no GPU is "
                                                  "usable: {}",
                                                  op, arg, ordinal, driver_unavailable_reason()));
  const int n = device_count();
  if (ordinal < 0 || ordinal >= n)
    throw_arg_error(ErrorKind::kInvalidArgument, op, arg,
                    fmt::format("a CUDA device ordinal from 0 to {} (this process sees {} GPU{}; "
                                "CUDA_VISIBLE_DEVICES renumbers them)",
                                n - 1, n, n == 1 ? "" : "s"),
                    std::to_string(ordinal));
}

namespace {
CUcontext primary_context(int ordinal) {
  // Retained once per device and never released: the primary context is
  // shared with the CUDA runtime (cuBLAS, PyTorch), so tilecraft and its
  // callers see the same memory and streams.
  static std::mutex m;
  static std::map<int, CUcontext> contexts;
  const DriverApi& d = driver();
  std::lock_guard<std::mutex> lock(m);
  auto it = contexts.find(ordinal);
  if (it != contexts.end()) return it->second;
  CUdevice dev;
  TC_CU(d.cuDeviceGet(&dev, ordinal));
  CUcontext ctx;
  TC_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev));
  contexts[ordinal] = ctx;
  return ctx;
}

// The handle cached per thread (the lock above is taken once per change of
// device); which context is current is asked of the driver every time.
CUcontext this_threads_primary(int ordinal) {
  thread_local int cached_ordinal = -1;
  thread_local CUcontext cached = nullptr;
  if (cached_ordinal != ordinal) {
    cached = primary_context(ordinal);
    cached_ordinal = ordinal;
  }
  return cached;
}

// Makes `ctx` current; returns the context that was.
CUcontext make_current(CUcontext ctx) {
  const DriverApi& d = driver();
  CUcontext was = nullptr;
  TC_CU(d.cuCtxGetCurrent(&was));
  if (was != ctx) TC_CU(d.cuCtxSetCurrent(ctx));
  return was;
}
}  // namespace

void ensure_context(int ordinal) { make_current(this_threads_primary(ordinal)); }

ContextScope::ContextScope(int ordinal) : mine_(this_threads_primary(ordinal)), saved_(make_current(mine_)) {}

ContextScope::~ContextScope() {
  // A thread that had no context keeps ours (nothing of the caller's to give
  // back, and the next call need not switch again). Errors cannot be thrown
  // from here; a failed restore leaves our context current, which the
  // caller's next runtime call corrects.
  if (saved_ && saved_ != mine_) driver().cuCtxSetCurrent(saved_);
}

void check_cu(CUresult result, const char* call, const char* file, int line) {
  if (result == CUDA_SUCCESS) return;
  const char* name = "?";
  const char* str = "?";
  if (driver_available()) {
    loaded().api.cuGetErrorName(result, &name);
    loaded().api.cuGetErrorString(result, &str);
  }
  throw Error(ErrorKind::kCuda,
              fmt::format("CUDA driver call failed: {} returned {} ({}) at {}:{}", call, name, str,
                          file, line));
}

}  // namespace tilecraft::rt
