// Shared by the standalone bandwidth diagnostics (scripts/bw_*.cu): error
// checks, the decode GEMVs' streaming 16-byte load, and event timing.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e_));                 \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Median of `timed` event-timed calls of f (launch latency included), after
// `warm` untimed ones; before() runs ahead of each call, outside the timing
// (an L2 flush, a counter reset).
template <typename Before, typename F>
float median_us(int warm, int timed, Before before, F f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int i = 0; i < warm + timed; ++i) {
    before();
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= warm) ts.push_back(ms * 1000);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}
