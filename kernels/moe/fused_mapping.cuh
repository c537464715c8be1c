#pragma once
// moe_fused_mapping: expert ids -> expert-major layout, on the device, in one
// block, deterministic and stable (rows of an expert ordered by token, then
// slot), with no host synchronisation.
//
// The T*K slots are split into one contiguous segment per warp.
//   A. each warp counts its segment's experts into its own shared row;
//   B. per expert, exclusive prefix over warps, totals, padded offsets;
//   C. each warp walks its segment again 32 slots at a time: a slot's row is
//      its expert's offset + the slots of that expert in earlier warps + in
//      earlier batches + earlier lanes of this batch (__match_any_sync).
#include "moe/fused_mapping_params.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/target.cuh"

namespace tc::moe {

constexpr int kMappingThreads = 1024;
// Batches of 32 slots per warp whose ids are loaded together in step C (8
// spilled in the gate+mapping kernel's 64 registers).
constexpr int kAhead = 4;

// The whole mapping by one block of kMappingThreads threads; smem holds
// (kWarps + 1) * E + 1 ints. ids are read through L2 (ld.global.cg): in the
// fused gate+mapping kernel other blocks of the same launch wrote them.
__device__ __forceinline__ void fused_mapping_block(const FusedMappingParams& p, int* smem) {
  constexpr int W = Target::kWarpSize;
  constexpr int kWarps = kMappingThreads / W;
  const int E = p.num_experts;
  int* cnt = smem;                 // [kWarps][E]
  int* offs = smem + kWarps * E;   // [E + 1]
  const int tid = threadIdx.x, warp = tid / W, lane = tid % W;
  const long long n = p.num_slots;
  const long long seg = (n + kWarps - 1) / kWarps;
  const long long begin = warp * seg, end = begin + seg < n ? begin + seg : n;

  for (int i = tid; i < kWarps * E; i += kMappingThreads) cnt[i] = 0;
  for (int i = tid; i < p.rows; i += kMappingThreads) p.pos_to_token[i] = -1;
  __syncthreads();

  // A. counts per warp segment (per-slot shared-memory atomics: a
  // warp-aggregated add by __match_any_sync ran 1.6x slower at E = 128-256,
  // H200 session 12).
  for (long long i = begin + lane; i < end; i += W) {
    const int e = __ldcg(p.ids + i);
    if (e >= 0 && e < E) atomicAdd(&cnt[warp * E + e], 1);
  }
  __syncthreads();

  // B. per-expert prefix over warps; totals.
  for (int e = tid; e < E; e += kMappingThreads) {
    int run = 0;
    for (int w = 0; w < kWarps; ++w) {
      const int c = cnt[w * E + e];
      cnt[w * E + e] = run;
      run += c;
    }
    p.tokens_per_expert[e] = run;
    offs[e + 1] = (run + p.block_m - 1) / p.block_m * p.block_m;
  }
  __syncthreads();
  if (warp == 0) {  // inclusive scan of the padded sizes, 32 experts at a time
    int carry = 0;
    for (int base = 0; base < E; base += W) {
      const int e = base + lane;
      int v = e < E ? offs[e + 1] : 0;
#pragma unroll
      for (int o = 1; o < W; o <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
      }
      if (e < E) offs[e + 1] = carry + v;
      carry += __shfl_sync(0xffffffffu, v, W - 1);
    }
    if (lane == 0) offs[0] = 0;
  }
  __syncthreads();
  for (int e = tid; e <= E; e += kMappingThreads) p.expert_offsets[e] = offs[e];
  if (tid == 0) *p.num_tiles = offs[E] / p.block_m;
  for (int i = tid; i < kWarps * E; i += kMappingThreads) cnt[i] += offs[i % E];
  __syncthreads();

  // C. rows, in slot order within each warp's segment. The ids of kAhead
  // batches are loaded together: one load latency per chunk instead of one
  // per batch (a warp walks 64 batches at 64K slots; race-like shapes ran
  // 11-21% faster, H200 session 12).
  const unsigned lanes_below = (1u << lane) - 1u;
  for (long long chunk = begin; chunk < end; chunk += W * kAhead) {
    int ev[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const long long i = chunk + u * W + lane;
      ev[u] = i < end ? __ldcg(p.ids + i) : -1;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const long long i = chunk + u * W + lane;
      const int e = ev[u];
      const bool valid = e >= 0 && e < E;
      const unsigned peers = __match_any_sync(0xffffffffu, valid ? e : -1);
      const int rank = __popc(peers & lanes_below);
      if (valid) {
        const int row = cnt[warp * E + e] + rank;
        p.token_topk_to_pos[i] = row;
        p.pos_to_token[row] = int(i / p.top_k);
      } else if (i < end) {
        p.token_topk_to_pos[i] = -1;
      }
      __syncwarp();
      if (valid && rank == 0) cnt[warp * E + e] += __popc(peers);
      __syncwarp();
    }
  }

  // Tile schedule: the expert owning each block_m-row tile.
  const int tiles = p.rows / p.block_m;
  for (int tile = tid; tile < tiles; tile += kMappingThreads) {
    const int row = tile * p.block_m;
    int owner = -1;
    if (row < offs[E]) {
      int lo = 0, hi = E - 1;  // last e with offs[e] <= row
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (offs[mid] <= row) lo = mid;
        else hi = mid - 1;
      }
      owner = lo;
    }
    p.tile_expert[tile] = owner;
  }
}

__global__ void __launch_bounds__(kMappingThreads, 1) fused_mapping_kernel(const FusedMappingParams p) {
  extern __shared__ int smem[];
  grid_dependency_begin();
  fused_mapping_block(p, smem);
}

}  // namespace tc::moe
