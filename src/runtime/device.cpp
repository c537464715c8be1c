#include "tilecraft/runtime/device.h"

#include <map>
#include <mutex>

#include "tilecraft/error.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::rt {

std::string DeviceInfo::arch() const {
  // Hopper's wgmma/setmaxnreg need the arch-specific 'a' target.
  std::string a = fmt::format("sm_{}{}", cc_major, cc_minor);
  if (cc_major == 9 && cc_minor == 0) a += "a";
  return a;
}

DeviceInfo device_info(int ordinal) {
  static std::mutex mu;
  static std::map<int, DeviceInfo> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(ordinal); it != cache.end()) return it->second;
  const DriverApi& d = driver();
  CUdevice dev;
  TC_CU(d.cuDeviceGet(&dev, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  TC_CU(d.cuDeviceGetName(name, sizeof(name), dev));
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    TC_CU(d.cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_threads_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  info.max_smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.regs_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  info.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.sm_clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.mem_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.mem_bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  TC_CU(d.cuDeviceTotalMem(&info.total_mem, dev));
  TC_CU(d.cuDriverGetVersion(&info.driver_version));
  info.pci_bus_id = fmt::format("{:08x}:{:02x}:{:02x}.0", attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                                attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID), attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
  cache[ordinal] = info;
  return info;
}

Stream::Stream(int device) {
  ensure_context(device);
  TC_DRV(cuStreamCreate, &s_, CU_STREAM_NON_BLOCKING);
}
Stream::~Stream() {
  if (s_) driver().cuStreamDestroy(s_);
}
void Stream::sync() const { TC_DRV(cuStreamSynchronize, s_); }

Event::Event() {
  CUcontext current = nullptr;
  TC_DRV(cuCtxGetCurrent, &current);
  if (!current) ensure_context(0);
  TC_DRV(cuEventCreate, &e_, CU_EVENT_DEFAULT);
}
Event::~Event() {
  if (e_) driver().cuEventDestroy(e_);
}
void Event::record(CUstream s) { TC_DRV(cuEventRecord, e_, s); }
float Event::elapsed_ms_since(const Event& start) const {
  TC_DRV(cuEventSynchronize, e_);
  float ms = 0;
  TC_DRV(cuEventElapsedTime, &ms, start.e_, e_);
  return ms;
}

ScratchBuffer::ScratchBuffer(size_t bytes, CUstream stream) : stream_(stream) {
  if (bytes == 0) return;
  TC_DRV(cuMemAllocAsync, &ptr_, bytes, stream);
}
ScratchBuffer::~ScratchBuffer() {
  if (ptr_) driver().cuMemFreeAsync(ptr_, stream_);
}

}  // namespace tilecraft::rt
