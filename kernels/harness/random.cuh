#pragma once
// Device twin of include/tilecraft/harness/random.h: the same counter-based
// generator, so device-generated inputs equal the host's bit for bit.
#include "harness/params.cuh"
#include "tile/types.cuh"

namespace tc::harness {


__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(const FillParams p) {
  const unsigned long long key = mix64(p.seed ^ mix64(p.stream));
  for (unsigned long long i = 1ull * blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += 1ull * gridDim.x * blockDim.x) {
    float u = float(mix64(key + i) >> 40) * (1.0f / 16777216.0f);
    static_cast<T*>(p.out)[i] = from_float<T>(__fmaf_rn(p.range, u, p.lo));
  }
}

}  // namespace tc::harness
