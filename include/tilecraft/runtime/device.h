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
  std::string arch() const;  // "sm_90a" for Hopper (the arch-specific target), else sm_XY
};

DeviceInfo device_info(int ordinal = 0);  // cached per ordinal

class Stream {
 public:
  Stream();  // non-blocking stream on the current context
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
