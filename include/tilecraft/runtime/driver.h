#pragma once
// The CUDA driver, loaded on first use with dlopen so that tilecraft starts and
// runs its CPU paths on machines with no GPU and no driver. Only the driver API
// is used; streams are plain CUstream values owned by the caller.
#include <cuda.h>

#include <string>

namespace tilecraft::rt {

// One pointer per driver entry point we use. Names are the API names; the
// loader resolves the versioned symbol (cuMemAlloc -> cuMemAlloc_v2) that
// cuda.h maps them to.
struct DriverApi {
#define TC_DRIVER_FN(name) decltype(&::name) name = nullptr;
#include "tilecraft/runtime/driver_functions.inc"
#undef TC_DRIVER_FN
};

// True when libcuda loaded, cuInit succeeded and at least one device exists.
bool driver_available();
// Why the driver is unavailable ("libcuda.so.1 not found", "no CUDA device").
std::string driver_unavailable_reason();
// The loaded API; throws Error(kNoDevice) with the reason when unavailable.
const DriverApi& driver();
// Makes device `ordinal`'s primary context current on this thread. It asks
// the driver which context is current (callers such as PyTorch switch
// devices behind our back), so it never trusts a cached answer.
void ensure_context(int ordinal = 0);
// CUDA devices visible to this process (counted once, when the driver loads).
int device_count();
// A GPU a user named (`op`'s argument `arg`, e.g. the CLI's --device):
// Error(kNoDevice) with the driver's reason where no GPU is usable, a usage
// error naming `op` and `arg` where this process sees no such ordinal.
void check_ordinal(int ordinal, const std::string& op, const std::string& arg);

// Makes device `ordinal`'s primary context current for a scope and gives the
// caller's context back at its end, as a library call should: an op on
// cuda:1 tensors leaves a caller working on cuda:0 on cuda:0.
class ContextScope {
 public:
  explicit ContextScope(int ordinal);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  CUcontext context() const { return mine_; }  // the GPU's primary context

 private:
  CUcontext mine_, saved_;
};

// Throws Error(kCuda) naming the call and the driver's error name/string.
void check_cu(CUresult result, const char* call, const char* file, int line);

}  // namespace tilecraft::rt

#define TC_CU(call) ::tilecraft::rt::check_cu((call), #call, __FILE__, __LINE__)
// Calls a driver entry point through the lazily loaded table.
#define TC_DRV(fn, ...) TC_CU(::tilecraft::rt::driver().fn(__VA_ARGS__))
