#include "ops/moe/launch_counters.h"

#include <map>
#include <mutex>
#include <string>

#include "tilecraft/error.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {

unsigned CounterPairSlots::next(bool capturing, const char* op) {
  if (!capturing) return eager_++ % kEagerPairs;
  TC_CHECK_ARG(captured_ < kCapturedPairs, op, "stream",
               "at most " + std::to_string(kCapturedPairs) +
                   " counter-using launches recorded into CUDA graphs per device and process (each keeps its own "
                   "counters)",
               "one more, while capturing");
  return kEagerPairs + captured_++;
}

unsigned* launch_counter_pair(int device, CUstream stream, const char* op) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  TC_DRV(cuStreamIsCapturing, stream, &status);
  struct Buffer {
    CUdeviceptr base = 0;
    CounterPairSlots slots;
  };
  static std::mutex mu;
  static std::map<int, Buffer> per_device;
  std::lock_guard<std::mutex> lock(mu);
  Buffer& b = per_device[device];
  if (!b.base) {
    const size_t bytes = size_t(CounterPairSlots::kPairs) * 2 * sizeof(unsigned);
    rt::ensure_context(device);
    TC_DRV(cuMemAlloc, &b.base, bytes);
    TC_DRV(cuMemsetD8, b.base, 0, bytes);
  }
  const unsigned slot = b.slots.next(status == CU_STREAM_CAPTURE_STATUS_ACTIVE, op);
  return reinterpret_cast<unsigned*>(b.base) + 2 * size_t(slot);
}

}  // namespace tilecraft::ops
