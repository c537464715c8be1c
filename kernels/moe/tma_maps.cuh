#pragma once
// Tensor maps of per-expert weights in global memory, for grouped GEMMs with
// more experts by pointer than the launch parameters hold (kParamMaps).
//
// Every expert's matrix has the same shape, strides and box, so its map is
// the host-encoded map of expert 0 with the global address replaced. One
// thread per (matrix, expert) re-points a copy of the template in shared
// memory (tensormap.replace, sm_90a), stores the finished map to dst and
// releases it to the tensormap proxy; the GEMM that follows on the stream
// acquires each map before its first copy (GroupedGemmSm90Ws::acquire_maps).
// The host rewrites a slot before every launch that reads it, and only ever
// with its final bytes (never the template's address: that is why the map
// is finished in shared memory), so a launch on another stream reading the
// same slot meanwhile sees the same map (tma_map_table.cpp).
#include "moe/tma_maps_params.cuh"
#include "tile/grid_dependency.cuh"

namespace tc::moe {

__global__ void __launch_bounds__(kTmaMapsThreads) build_tma_maps_kernel(const __grid_constant__ TmaMapsBuild b) {
  __shared__ alignas(128) TmaDesc staged[kTmaMapsThreads];
  // Ordered after the previous kernel like every kernel of a chain: the GEMM
  // after this one waits only for this grid, so this one must not finish
  // before its predecessor (the mapping that the GEMM reads too).
  grid_dependency_begin();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= b.experts * b.mats) return;
  const int m = i / b.experts, e = i % b.experts;
  TmaDesc& s = staged[threadIdx.x];
#pragma unroll
  for (int w = 0; w < 16; ++w) s.word[w] = b.tmpl[m].word[w];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(&s))),
               "l"(b.ptr[m][e])
               : "memory");
#endif
  TmaDesc* d = b.dst + i;
#pragma unroll
  for (int w = 0; w < 16; w += 2)  // 16-byte stores of the finished map
    *reinterpret_cast<ulonglong2*>(&d->word[w]) = *reinterpret_cast<const ulonglong2*>(&s.word[w]);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.tensormap::generic.release.gpu;\n" ::: "memory");
#endif
}

}  // namespace tc::moe
