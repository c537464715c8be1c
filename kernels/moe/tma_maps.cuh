#pragma once
// Tensor maps of per-expert weights in global memory, for grouped GEMMs with
// more experts by pointer than the launch parameters hold (kParamMaps).
//
// Every expert's matrix has the same shape, strides and box, so its map is
// the host-encoded map of expert 0 with the global address replaced. One
// thread per (matrix, expert) copies the template into dst and re-points it
// (tensormap.replace, sm_90a), then releases it to the tensormap proxy; the
// GEMM that follows on the stream acquires each map before its first copy
// (GroupedGemmSm90Ws::acquire_maps). Between the copy and the replace the
// slot holds expert 0's address, so no launch may read a slot while another
// rewrites it: the host keeps a slot per weight set and stream
// (tma_map_table.cpp), and on its stream this kernel writes only after the
// previous kernel has finished (its grid dependency wait).
#include "moe/tma_maps_params.cuh"
#include "tile/grid_dependency.cuh"

namespace tc::moe {

__global__ void build_tma_maps_kernel(const __grid_constant__ TmaMapsBuild b) {
  // Ordered after the previous kernel like every kernel of a chain: the GEMM
  // after this one waits only for this grid, so this one must not finish
  // before its predecessor (the mapping that the GEMM reads too).
  grid_dependency_begin();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= b.experts * b.mats) return;
  const int m = i / b.experts, e = i % b.experts;
  TmaDesc* d = b.dst + i;
#pragma unroll
  for (int w = 0; w < 16; ++w) d->word[w] = b.tmpl[m].word[w];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;\n" ::"l"(d), "l"(b.ptr[m][e])
               : "memory");
  asm volatile("fence.proxy.tensormap::generic.release.gpu;\n" ::: "memory");
#endif
}

}  // namespace tc::moe
