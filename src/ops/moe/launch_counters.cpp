#include "ops/moe/launch_counters.h"

#include <cuda.h>

#include <map>
#include <mutex>
#include <utility>

#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {

unsigned* launch_counter_pair(int device) {
  constexpr int kCounterPairs = 4096;
  static std::mutex mu;
  static std::map<int, std::pair<CUdeviceptr, unsigned>> per_device;
  std::lock_guard<std::mutex> lock(mu);
  auto& [base, next] = per_device[device];
  if (!base) {
    rt::ensure_context(device);
    TC_DRV(cuMemAlloc, &base, size_t(kCounterPairs) * 2 * sizeof(unsigned));
    TC_DRV(cuMemsetD8, base, 0, size_t(kCounterPairs) * 2 * sizeof(unsigned));
  }
  const unsigned slot = next++ % kCounterPairs;
  return reinterpret_cast<unsigned*>(base) + 2 * slot;
}

}  // namespace tilecraft::ops
