#pragma once
// Device properties, RAII streams/events, and the stream-ordered scratch pool.
#include <cuda.h>

#include <string>

namespace tilecraft::rt {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int max_smem_per_block_optin = 0;
  int smem_per_sm = 0;
  int regs_per_sm = 0;
  int warp_size = 0;
  int l2_bytes = 0;
  int sm_clock_khz = 0;
  int mem_clock_khz = 0;
  int mem_bus_bits = 0;
  size_t total_mem = 0;
  int driver_version = 0;
  // "dddddddd:bb:ss.0": how NVML and nvidia-smi -i name this GPU (they may
  // number devices otherwise than CUDA does).
  std::string pci_bus_id;
  std::string arch() const;  // "sm_90a" for Hopper (the arch-specific target), else sm_XY
};

DeviceInfo device_info(int ordinal = 0);  // cached per ordinal

class Stream {
 public:
  // A non-blocking stream of GPU `device`, whose primary context this makes
  // current on the calling thread (the harness then works in it).
  explicit Stream(int device = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  void sync() const;

 private:
  CUstream s_ = nullptr;
};

class Event {
 public:
  // In the calling thread's current context (that of the stream it will be
  // recorded on: the harness makes its GPU's current), or device 0's primary
  // where the thread has none.
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(CUstream s);
  CUevent get() const { return e_; }
  float elapsed_ms_since(const Event& start) const;  // synchronizes on this event

 private:
  CUevent e_ = nullptr;
};

// Stream-ordered scratch from the device's default memory pool: allocation and
// release are enqueued on the stream (no device-wide sync, graph-capturable).
class ScratchBuffer {
 public:
  ScratchBuffer(size_t bytes, CUstream stream);
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  CUdeviceptr get() const { return ptr_; }

 private:
  CUdeviceptr ptr_ = 0;
  CUstream stream_;
};

}  // namespace tilecraft::rt
