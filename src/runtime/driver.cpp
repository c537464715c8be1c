#include "tilecraft/runtime/driver.h"

#include <dlfcn.h>

#include <mutex>

#include "tilecraft/error.h"

namespace tilecraft::rt {
namespace {

#define TC_STR2(x) #x
#define TC_STR(x) TC_STR2(x)  // expands cuda.h's version macros before quoting

struct Loaded {
  DriverApi api;
  bool ok = false;
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

void ensure_context(int ordinal) {
  // Primary contexts are shared with the CUDA runtime (cuBLAS, PyTorch), so
  // tilecraft and its callers see the same memory and streams.
  thread_local int current = -1;
  if (current == ordinal) return;
  const DriverApi& d = driver();
  CUdevice dev;
  TC_CU(d.cuDeviceGet(&dev, ordinal));
  CUcontext ctx;
  TC_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev));
  TC_CU(d.cuCtxSetCurrent(ctx));
  current = ordinal;
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
