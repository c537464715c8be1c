#pragma once
// Each op's cache from its packed config code (plus compile options and
// device) to a loaded kernel: a cached call costs one hash lookup and no
// string building. Misses go through jit::get_kernel.
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tilecraft/jit/jit.h"

namespace tilecraft::jit {

class OpKernelCache {
 public:
  // `make` builds the spec on a miss; `on_load` runs once per loaded kernel
  // (e.g. to raise its dynamic shared memory limit).
  const Launchable& get(uint64_t code, const CompileOptions& options, int device,
                        const std::function<KernelSpec()>& make,
                        const std::function<void(const Launchable&)>& on_load = {});

 private:
  struct Entry {
    CompileOptions options;
    int device;
    const Launchable* kernel;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<Entry>> map_;
};

}  // namespace tilecraft::jit
