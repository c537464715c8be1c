#pragma once
// mbarriers and bulk copies into this CTA's shared memory (sm_90). Addresses
// are 32-bit shared::cta addresses; a CTA launched without a cluster is its
// own cluster of one, so the shared::cluster copies below land in its own
// shared memory. Elsewhere the bodies are empty: only sm_90 kernels call them.

namespace tc {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TC_SM90_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TC_SM90_ASM(...) (void)0
#endif

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  TC_SM90_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  TC_SM90_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// (Also by shared::cta address, for loops that convert their pointers once.)
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  TC_SM90_ASM("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) { mbar_arrive(smem_addr(bar)); }
// One arrival that also raises the phase's expected transaction bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  TC_SM90_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned a, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!done);
#else
  (void)a, (void)parity;
#endif
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) { mbar_wait(smem_addr(bar), parity); }

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global
// memory into this CTA's shared memory, completing `bytes` of `bar`'s
// transaction count when they have landed.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  TC_SM90_ASM("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                  smem_addr(dst)),
              "l"(src), "r"(bytes), "r"(smem_addr(bar))
              : "memory");
}

// Tensor copy of one box at coordinates (c0, c1, c2) of the tensor map
// `map` (a CUtensorMap in parameter, constant or global memory) into shared
// memory (128-byte aligned), completing the box's bytes on `bar`.
__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, int c0, int c1, int c2,
                                            unsigned long long* bar) {
  TC_SM90_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_addr(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2),
      "r"(smem_addr(bar))
      : "memory");
}

// An L2 cache policy whose lines go first when the L2 needs room.
__device__ __forceinline__ unsigned long long l2_evict_first_policy() {
  unsigned long long policy = 0;
  TC_SM90_ASM("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// The two copies above under the L2 cache policy `policy` (e.g. an
// evict-first one for weights read once, so that they do not push out
// lines still to be read).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar,
                                          unsigned long long policy) {
  TC_SM90_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, int c0, int c1, int c2,
                                            unsigned long long* bar, unsigned long long policy) {
  TC_SM90_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

#undef TC_SM90_ASM

}  // namespace tc
