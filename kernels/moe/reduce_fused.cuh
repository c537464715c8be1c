#pragma once
// moe_reduce_fused: out[t, :] = cast(sf * sum_k s_k * x[pos[t,k], :]), with
// s_k = weight[t,k] * x_sf[pos] and the FMAs in k order (so the CPU golden
// matches bit for bit).
//
// Tiling: one thread owns a VEC-wide column chunk of one token row (16 bytes
// of x on the fast path) for ITEMS chunks spaced a block apart, so a warp
// reads contiguous 512-byte stretches of each routed row. All K rows of all
// ITEMS chunks are loaded before the first FMA, giving K*ITEMS independent
// 16-byte loads in flight per thread: the kernel is a pure stream and latency
// hiding is what decides its speed.
#include "tile/types.cuh"
#include "tile/vec.cuh"
#include "moe/reduce_fused_params.cuh"

namespace tc::moe {


template <typename TIn, typename TOut, int K, int VEC, int ITEMS, bool HAS_W, bool HAS_XSF, bool HAS_SF,
          bool CHECKED>
__global__ void __launch_bounds__(256, 1) reduce_fused_kernel(const ReduceFusedParams p) {
  const TIn* x = static_cast<const TIn*>(p.x);
  TOut* out = static_cast<TOut*>(p.out);
  const long long base = (1ll * blockIdx.x * ITEMS) * blockDim.x + threadIdx.x;

  Vec<TIn, VEC> rows[ITEMS][K];
  float scale[ITEMS][K];
  bool live[ITEMS][K];
  long long token[ITEMS];
  int col[ITEMS];

#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    const long long chunk = base + 1ll * it * blockDim.x;
    token[it] = chunk / p.chunks_per_row;
    col[it] = int(chunk - token[it] * p.chunks_per_row) * VEC;
    const bool in_range = chunk < p.num_chunks;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int r = in_range ? __ldg(p.pos + token[it] * K + k) : -1;
      // Out-of-range positions are never read, in either mode.
      live[it][k] = r >= 0 && r < p.num_rows;
      if constexpr (CHECKED) {
        if (in_range && r >= p.num_rows && col[it] == 0) {
          atomicMin(p.bad_slot, int(token[it] * K + k));
          atomicAdd(p.bad_slot + 1, 1);
        }
      }
      float s = 1.0f;
      if constexpr (HAS_W) s = in_range ? __ldg(p.weights + token[it] * K + k) : 0.f;
      if constexpr (HAS_XSF) {
        if (live[it][k]) s = __fmul_rn(s, __ldg(p.x_sf + r));
      }
      scale[it][k] = s;
      // Always assigned (zeros when skipped): a partly written register array
      // can be demoted to local memory.
      rows[it][k] = live[it][k] ? load_stream<TIn, VEC>(x + 1ll * r * p.hidden + col[it]) : Vec<TIn, VEC>{};
    }
  }

  const float global = HAS_SF ? __ldg(p.sf) : 1.0f;
#pragma unroll
  for (int it = 0; it < ITEMS; ++it) {
    if (base + 1ll * it * blockDim.x >= p.num_chunks) continue;
    float acc[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (!live[it][k]) continue;
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = __fmaf_rn(to_float(rows[it][k].v[v]), scale[it][k], acc[v]);
    }
    Vec<TOut, VEC> o;
#pragma unroll
    for (int v = 0; v < VEC; ++v) o.v[v] = from_float<TOut>(HAS_SF ? __fmul_rn(acc[v], global) : acc[v]);
    store(out + token[it] * p.hidden + col[it], o);
  }
}

}  // namespace tc::moe
