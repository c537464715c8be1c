#pragma once
// moe_topk_gate + moe_fused_mapping in one launch: the first tokens_per_block
// warps of every block select one token's experts each (topk_gate_token), and
// the last block to finish builds the expert-major layout from all of them
// (fused_mapping_block). Few tokens per block spread the selections over
// the SMs: 32 of them on one SM were bound by its issue rate. It
// saves the second launch and its wait, which dominate both steps at decode
// sizes. Results are bitwise those of the two kernels run one after the other.
#include "moe/fused_mapping.cuh"
#include "moe/gate_mapping_params.cuh"
#include "moe/topk_gate.cuh"
#include "tile/atomics.cuh"
#include "tile/trace.cuh"

namespace tc::moe {

// p.done reads 0 at launch; the last block resets it, so the same counter
// serves the next launch (and every replay of a graph). A grid of one block
// leaves it alone.
// Trace slots (compile option `trace`, thread 0): 0 entry, 1 dependency
// wait over, 9-10 its gate warp's selection loop, 2 its token done, 3 the
// mapping prepared, 4 the done atomic; the last block 5-8 (mapping phases,
// fused_mapping_block).
template <int MODE, int EPL, int K, int ROUND>
__global__ void __launch_bounds__(kMappingThreads, 1) topk_gate_mapping_kernel(const GateMappingParams p) {
  constexpr int W = Target::kWarpSize;
  const TopkGateParams& g = p.gate;
  extern __shared__ int smem[];
  trace_stamp(0);
  grid_dependency_begin();
  trace_stamp(1);
  const int warp = threadIdx.x / W;
  const long long t = 1ll * blockIdx.x * p.tokens_per_block + warp;
  if (warp < p.tokens_per_block && t < g.num_tokens) topk_gate_token<MODE, EPL, K, ROUND>(g, t, threadIdx.x % W);
  trace_stamp(2);
  // The idle warps start at once, the gate warps after their token.
  prepare_mapping(p.mapping, smem, blockIdx.x, gridDim.x);
  __syncthreads();
  trace_stamp(3);
  if (gridDim.x > 1) {
    // The last-block pattern with one release-acquire atomic: the barrier
    // orders the block's ids and pos_to_token writes before thread 0's
    // release, and the barrier after its acquire orders the last block's
    // reads after it. (The fence every thread of the last block ran after
    // the atomic took ~0.6 us there: H200 session 25, %globaltimer trace.)
    __shared__ bool last;
    if (threadIdx.x == 0) last = atomic_add_acq_rel_gpu(p.done, 1u) == gridDim.x - 1;
    __syncthreads();
    trace_stamp(4);
    if (!last) return;
  }
  // (One block: its own writes are visible to it after the barrier; no
  // counter round trip, the decode path's latency.)
  // The gate gives each token K distinct experts: the placing may go token
  // by token instead of by match.any.
  fused_mapping_block<true>(p.mapping, smem);
  if (threadIdx.x == 0 && gridDim.x > 1) *p.done = 0u;
}

}  // namespace tc::moe
