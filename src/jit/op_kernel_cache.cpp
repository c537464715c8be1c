#include "tilecraft/jit/op_kernel_cache.h"

namespace tilecraft::jit {

const Launchable& OpKernelCache::get(uint64_t code, const CompileOptions& options, int device,
                                     const std::function<KernelSpec()>& make,
                                     const std::function<void(const Launchable&)>& on_load) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(code); it != map_.end())
      for (const Entry& e : it->second)
        if (e.device == device && e.options == options) return *e.kernel;
  }
  const KernelSpec spec = make();  // named: g++ 13 warns of a reference bound through a temporary
  const Launchable& k = get_kernel(spec, options, device);
  if (on_load) on_load(k);
  std::lock_guard<std::mutex> lock(mu_);
  map_[code].push_back({options, device, &k});
  return k;
}

}  // namespace tilecraft::jit
