#pragma once
// Ceilings measured on this device: device-to-device copy bandwidth (bytes
// read + written), read-only streaming bandwidth, a cuBLAS bf16 GEMM on a large
// square problem, and the time of an empty kernel launch. Cached per device in
// the JIT cache directory; re-measured on request.
#include <string>

#include <nlohmann/json.hpp>

#include "tilecraft/dtype.h"

struct CUstream_st;

namespace tilecraft::harness {

struct Ceilings {
  double copy_gbps = 0;       // GB/s = 1e9 bytes/s
  double read_gbps = 0;
  double gemm_tflops = 0;     // 0 if cuBLAS could not be loaded
  double empty_launch_us = 0; // event-timed empty kernel, median
  std::string gemm_note;
  std::string measured_at;
  bool from_cache = false;
  nlohmann::json to_json() const;
};

Ceilings measure_ceilings(int device, bool remeasure);

struct TimingSettings;
class L2Flusher;
// Median of an empty kernel under the given protocol (flush included), so a
// small op's time can be set against the launch floor it cannot beat.
double empty_launch_us(int device, const TimingSettings& s, L2Flusher* flusher);
// Median time of a device copy moving `bytes` in total (half read, half
// written) under the given protocol: the bandwidth a stream of exactly this
// size reaches, launch and ramp included.
double same_size_copy_us(double bytes, int device, const TimingSettings& s, L2Flusher* flusher);

// cuBLAS bf16 GEMM (m=n=k) in TFLOP/s on random data, loaded with dlopen.
// Returns 0 and sets `note` when cuBLAS is unavailable.
double cublas_gemm_tflops(int device, int n, std::string& note);

// Row-major C[m, n] = A[m, k] . W on `stream` with cuBLAS (fp32 accumulation,
// C in the inputs' 16-bit dtype), W either [n, k] (w_nk) or [k, n]. For
// baselines. Returns false and sets `why` when cuBLAS is unavailable or fails.
bool cublas_gemm_rowmajor(int device, CUstream_st* stream, bool w_nk, int64_t m, int64_t n, int64_t k, DType dtype,
                          const void* a, const void* w, void* c, std::string& why);

}  // namespace tilecraft::harness
