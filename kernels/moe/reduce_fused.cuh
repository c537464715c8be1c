#pragma once
// moe_reduce_fused: out[t, :] = cast(sf * sum_k s_k * x[pos[t,k], :]), with
// s_k = weight[t,k] * x_sf[pos] and the FMAs in k order (so the CPU golden
// matches bit for bit).
//
// Tiling: blockIdx.y walks tokens, blockIdx.x covers one token row in column
// blocks. A thread owns ITEMS column chunks of VEC elements (16 bytes of x on
// the fast path), spaced one block apart, so a warp reads contiguous 512-byte
// stretches of each routed row. No index division anywhere. The token's K
// positions and scales are block-uniform loads (broadcast through L1). All K
// rows of all ITEMS chunks are loaded before the first FMA: K*ITEMS
// independent 16-byte loads in flight per thread. The kernel is a pure
// stream; latency hiding and the wave tail decide its speed.
#include "moe/reduce_fused_params.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/types.cuh"
#include "tile/vec.cuh"

namespace tc::moe {

// HINTS bit 0: streaming (evict-first) output stores; bit 1: L2 256-byte
// fetch hint on the row loads.
template <typename TIn, typename TOut, int K, int VEC, int ITEMS, bool HAS_W, bool HAS_XSF, bool HAS_SF,
          bool CHECKED, int HINTS = 0>
__global__ void __launch_bounds__(256, 1) reduce_fused_kernel(const ReduceFusedParams p) {
  grid_dependency_begin();
  const TIn* x = static_cast<const TIn*>(p.x);
  TOut* out = static_cast<TOut*>(p.out);
  const int chunk0 = blockIdx.x * blockDim.x * ITEMS + threadIdx.x;
  const float global = HAS_SF ? __ldg(p.sf) : 1.0f;

  for (long long t = blockIdx.y; t < p.num_tokens; t += gridDim.y) {
    int pos[K];
    float scale[K];
#pragma unroll
    for (int k = 0; k < K; ++k) pos[k] = __ldg(p.pos + t * K + k);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if constexpr (CHECKED) {
        if (pos[k] >= p.num_rows && blockIdx.x == 0 && threadIdx.x == 0) {
          atomicMin(p.bad_slot, int(t * K + k));
          atomicAdd(p.bad_slot + 1, 1);
        }
      }
      if (pos[k] >= p.num_rows) pos[k] = -1;  // out-of-range rows are never read
    }

    Vec<TIn, VEC> rows[ITEMS][K];
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
      const int col = (chunk0 + it * int(blockDim.x)) * VEC;
      const bool in_row = col < p.hidden;
#pragma unroll
      for (int k = 0; k < K; ++k)
        rows[it][k] = load_stream_if<TIn, VEC, (HINTS & 2) != 0>(x + 1ll * (pos[k] < 0 ? 0 : pos[k]) * p.hidden + col,
                                               in_row && pos[k] >= 0);
    }

    // Scales after the row loads are in flight.
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float s = HAS_W ? __ldg(p.weights + t * K + k) : 1.0f;
      if constexpr (HAS_XSF) s = pos[k] >= 0 ? __fmul_rn(s, __ldg(p.x_sf + pos[k])) : s;
      scale[k] = s;
    }

#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
      const int col = (chunk0 + it * int(blockDim.x)) * VEC;
      if (col >= p.hidden) continue;
      float acc[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (pos[k] < 0) continue;
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] = __fmaf_rn(to_float(rows[it][k].v[v]), scale[k], acc[v]);
      }
      Vec<TOut, VEC> o;
#pragma unroll
      for (int v = 0; v < VEC; ++v) o.v[v] = from_float<TOut>(HAS_SF ? __fmul_rn(acc[v], global) : acc[v]);
      if constexpr (HINTS & 1) store_stream(out + t * p.hidden + col, o);
      else store(out + t * p.hidden + col, o);
    }
  }
}

}  // namespace tc::moe
