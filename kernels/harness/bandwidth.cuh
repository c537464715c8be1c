#pragma once
// Kernels the harness uses to measure this device: copy and read-only
// streaming bandwidth (the memory ceilings), the L2 flush (reads, so the
// cache is left clean), and an empty kernel (the launch floor).
#include "harness/params.cuh"
#include "tile/vec.cuh"

namespace tc::harness {


template <int UNROLL>
__global__ void copy_kernel(const StreamParams p) {
  const uint4* src = static_cast<const uint4*>(p.src);
  uint4* dst = static_cast<uint4*>(p.dst);
  unsigned long long stride = 1ull * gridDim.x * blockDim.x;
  unsigned long long i = 1ull * blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < p.n; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = load_stream<uint4, 1>(src + i + u * stride).v[0];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < p.n; i += stride) dst[i] = load_stream<uint4, 1>(src + i).v[0];
}

template <int UNROLL>
__global__ void read_kernel(const StreamParams p) {
  unsigned long long stride = 1ull * gridDim.x * blockDim.x;
  unsigned int acc = 0;
  unsigned long long i = 1ull * blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < p.n; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = load_stream<uint4, 1>(static_cast<const uint4*>(p.src) + i + u * stride).v[0];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < p.n; i += stride) {
    uint4 v = load_stream<uint4, 1>(static_cast<const uint4*>(p.src) + i).v[0];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) p.sink[0] = acc;  // keeps the loads alive
}

// The L2 flush's first pass: a streaming read of the buffer with every line
// marked evict_last. Lines an earlier kernel marked evict_last outlive a
// plain read (the L2 gives up its normal lines first; on the H200 such lines
// outlived a normal read of 2x L2, session 31); this pass evicts them.
template <int UNROLL>
__global__ void flush_read_last_kernel(const StreamParams p) {
  const uint4* src = static_cast<const uint4*>(p.src);
  unsigned long long policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  const auto load = [&](unsigned long long i) {
    uint4 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(src + i), "l"(policy));
#else
    r = load_stream<uint4, 1>(src + i).v[0];
#endif
    return r;
  };
  const unsigned long long stride = 1ull * gridDim.x * blockDim.x;
  unsigned int acc = 0;
  unsigned long long i = 1ull * blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < p.n; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = load(i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < p.n; i += stride) {
    const uint4 v = load(i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) p.sink[0] = acc;  // keeps the loads alive
}

// The flush's second pass: every 128-byte line of the buffer still in the L2
// back to normal priority, so the timed call finds the cache as a plain read
// leaves it (full of clean lines of normal priority) and not full of lines it
// would have to evict last.
__global__ void flush_normal_kernel(const StreamParams p) {
  const char* base = static_cast<const char*>(p.src);
  const unsigned long long lines = p.n * 16 / 128, stride = 1ull * gridDim.x * blockDim.x;
  for (unsigned long long i = 1ull * blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;\n" ::"l"(base + i * 128) : "memory");
#endif
  }
}

__global__ void empty_kernel(const StreamParams) {}

}  // namespace tc::harness
