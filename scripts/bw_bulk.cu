// Does streaming weights through shared memory by bulk copies (a ring of
// stages filled by one producer thread) read faster than the decode GEMVs'
// register loads, at decode sizes? A diagnostic, not part of the library:
// the register-load kernels keep a few 16-byte loads in flight per lane
// (their registers hold the accumulators too); a bulk-copy ring keeps a
// whole stage ring in flight per CTA at no register cost.
//   nvcc -O3 -arch=sm_90a -o bw_bulk scripts/bw_bulk.cu && ./bw_bulk
// Each size is read cold (2x the L2 read first), as the benchmarks do; times
// are medians of 9 event-timed launches (launch latency included, as in the
// layer's scopes).
#include <algorithm>
#include <vector>

#include "bw_common.cuh"

__global__ void flush_kernel(const uint4* src, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc ^= ld_stream(src + i).x;
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// The GEMV-like register pattern: each warp streams its contiguous share,
// LOADS 16-byte loads in flight per lane.
template <int LOADS>
__global__ void __launch_bounds__(256, 2) regs_kernel(const uint4* src, size_t n, unsigned* sink) {
  const size_t warps = size_t(gridDim.x) * 8, w = size_t(blockIdx.x) * 8 + threadIdx.x / 32;
  const size_t lo = n * w / warps, hi = n * (w + 1) / warps;
  const int lane = threadIdx.x % 32;
  unsigned acc = 0;
  for (size_t i = lo + lane; i < hi; i += 32 * LOADS) {
    uint4 v[LOADS];
#pragma unroll
    for (int u = 0; u < LOADS; ++u) v[u] = i + 32 * u < hi ? ld_stream(src + i + 32 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < LOADS; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

__device__ __forceinline__ unsigned sa(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned c) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(c) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(sa(b)), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {
  asm volatile("{ .reg .b64 s; mbarrier.arrive.shared::cta.b64 s, [%0]; }" ::"r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   sa(dst)),
               "l"(src), "r"(bytes), "r"(sa(b))
               : "memory");
}

// Ring of STAGES stages of `stage` bytes; warp 8 lane 0 produces, warps 0-7
// consume (xor the stage, then release it). Pieces of `stage` bytes: a static
// contiguous range per CTA (counter == null) or handed out by a counter.
// split > 1: the buffer is `split` equal matrices, and piece p is `split`
// copies of stage / split bytes, one from each at offset p * stage / split
// (the combine decode kernel's pattern: one 4 KB row of each of 8 experts).
template <int STAGES>
__global__ void __launch_bounds__(288, 1) bulk_kernel(const char* src, size_t bytes, unsigned stage,
                                                      unsigned* counter, unsigned* sink, unsigned split = 1) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  __shared__ long long piece_of[STAGES];
  const size_t pieces = (bytes + stage - 1) / stage;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const size_t p0 = pieces * blockIdx.x / gridDim.x, p1 = pieces * (blockIdx.x + 1) / gridDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 8) {
    if (lane != 0) return;
    size_t next = counter ? atomicAdd(counter, 1u) : p0;
    for (unsigned k = 0;; ++k) {
      const int s = k % STAGES;
      if (k >= STAGES) mbar_wait(&empty[s], ((k / STAGES) - 1) & 1);
      const bool done = counter ? next >= pieces : next >= p1;
      piece_of[s] = done ? -1 : (long long)next;
      if (done) {
        mbar_arrive(&full[s]);
        return;
      }
      const size_t off = next * stage;
      const unsigned n = unsigned(bytes - off < stage ? bytes - off : stage);
      mbar_expect(&full[s], n);
      if (split == 1) {
        bulk(ring + size_t(s) * stage, src + off, n, &full[s]);
      } else {  // (sizes here are whole pieces: n == stage)
        const unsigned part = n / split;
        for (unsigned u = 0; u < split; ++u)
          bulk(ring + size_t(s) * stage + u * part, src + u * (bytes / split) + next * part, part, &full[s]);
      }
      next = counter ? atomicAdd(counter, 1u) : next + 1;
    }
  }
  unsigned acc = 0;
  for (unsigned k = 0;; ++k) {
    const int s = k % STAGES;
    mbar_wait(&full[s], (k / STAGES) & 1);
    const long long p = piece_of[s];
    if (p < 0) break;
    const size_t rest = bytes - size_t(p) * stage;
    const unsigned n = unsigned(rest < stage ? rest : stage) / 16;
    const uint4* v = reinterpret_cast<const uint4*>(ring + size_t(s) * stage);
    for (unsigned i = threadIdx.x; i < n; i += 256) {
      const uint4 x = v[i];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
  // The last CTA out resets the counter for the next launch.
  __syncthreads();
}

int main() {
  int sms, l2;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t max_bytes = size_t(1) << 30, flush_bytes = 2 * size_t(l2);
  char *buf, *fl;
  unsigned *sink, *counter;
  CK(cudaMalloc(&buf, max_bytes));
  CK(cudaMalloc(&fl, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&counter, 4));
  CK(cudaMemset(buf, 1, max_bytes));
  CK(cudaMemset(fl, 2, flush_bytes));
  // Cold: each launch follows a read of 2x the L2 (and a counter reset).
  auto time_us = [&](auto launch) {
    return median_us(1, 9,
                     [&] {
                       flush_kernel<<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(fl), flush_bytes / 16, sink);
                       CK(cudaMemset(counter, 0, 4));
                     },
                     launch);
  };
  for (size_t mb : {25, 75, 235, 705}) {
    const size_t bytes = mb << 20, n = bytes / 16;
    std::printf("%zu MB cold:\n", mb);
    auto report = [&](const char* name, float t) {
      std::printf("  %-44s %8.1f us  %6.0f GB/s\n", name, t, bytes / t / 1e3);
    };
    report("registers, 4 loads/lane, 2 CTAs/SM", time_us([&] {
             regs_kernel<4><<<sms * 2, 256>>>(reinterpret_cast<const uint4*>(buf), n, sink);
           }));
    report("registers, 16 loads/lane, 2 CTAs/SM", time_us([&] {
             regs_kernel<16><<<sms * 2, 256>>>(reinterpret_cast<const uint4*>(buf), n, sink);
           }));
    for (unsigned stage : {16384u, 32768u}) {
      constexpr int kStages = 6;
      const unsigned smem = kStages * stage;
      CK(cudaFuncSetAttribute(bulk_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      char name[96];
      std::snprintf(name, sizeof name, "bulk ring 6 x %u KB, static ranges", stage / 1024);
      report(name, time_us([&] { bulk_kernel<kStages><<<sms, 288, smem>>>(buf, bytes, stage, nullptr, sink); }));
      std::snprintf(name, sizeof name, "bulk ring 6 x %u KB, counter", stage / 1024);
      report(name, time_us([&] { bulk_kernel<kStages><<<sms, 288, smem>>>(buf, bytes, stage, counter, sink); }));
      for (unsigned split : {2u, 8u}) {
        std::snprintf(name, sizeof name, "bulk ring 6 x %u KB, static, %u copies", stage / 1024, split);
        report(name, time_us([&] {
                 bulk_kernel<kStages><<<sms, 288, smem>>>(buf, bytes, stage, nullptr, sink, split);
               }));
      }
    }
  }
  return 0;
}
