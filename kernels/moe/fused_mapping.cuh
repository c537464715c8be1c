#pragma once
// moe_fused_mapping: expert ids -> expert-major layout, on the device,
// deterministic and stable (rows of an expert ordered by token, then slot),
// with no host synchronisation.
//
// One block (fused_mapping_kernel, and the last block of the gate+mapping
// kernel): the T*K slots are split into one contiguous segment per warp.
//   A. each warp counts its segment's experts into its own shared row;
//   B. per expert (a thread each), exclusive prefix over warps, totals;
//      padded offsets by a block-wide scan;
//   C. each warp walks its segment again 32 slots at a time: a slot's row is
//      its expert's offset + the slots of that expert in earlier warps + in
//      earlier batches + earlier lanes of this batch (__match_any_sync).
// Several blocks (large T*K: one block is bound by its one SM's issue rate):
// the slots are split into one contiguous segment per block first.
//   mapping_count_kernel: each block counts its segment per expert into
//     block_counts[block][E];
//   mapping_scatter_kernel: each block sums those counts (totals, and its
//     base: the expert's slots in earlier blocks), scans the padded offsets
//     itself, then runs A and C on its own segment from those bases. Block
//     0 writes the counts, offsets and tile count; every block writes the
//     padding rows and the tile owners of its share of rows.
// Both give the same bits.
#include "moe/fused_mapping_params.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/target.cuh"
#include "tile/trace.cuh"

namespace tc::moe {

constexpr int kMappingThreads = 1024;
constexpr int kMappingWarps = kMappingThreads / Target::kWarpSize;
// Batches of 32 slots per warp whose ids are loaded together in step C (8
// spilled in the gate+mapping kernel's 64 registers).
constexpr int kAhead = 4;

namespace mapping {
constexpr int W = Target::kWarpSize;

// The part [lo, hi) of n items that part `i` of `parts` gets (contiguous,
// in order, sizes differ by at most one).
__device__ __forceinline__ void split(long long n, int parts, int i, long long& lo, long long& hi) {
  lo = n * i / parts;
  hi = n * (i + 1) / parts;
}

// Block-wide (every thread calls it; E <= kMappingThreads): thread e < E
// gives `padded`, its expert's padded rows, and offs[0..E] receives the
// exclusive prefix (offs[0] = 0, offs[E] = all rows in use), visible after
// the caller's next barrier. Each warp scans its 32 experts, then adds the
// totals of the warps before it: two shuffle scans, not E / 32 in turn.
__device__ __forceinline__ void scan_offsets(int padded, int* offs, int E) {
  __shared__ int warp_total[kMappingWarps];
  const int tid = threadIdx.x, lane = tid % W, warp = tid / W;
  int v = tid < E ? padded : 0;
#pragma unroll
  for (int o = 1; o < W; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  if (lane == W - 1) warp_total[warp] = v;
  __syncthreads();
  int before = lane < warp ? warp_total[lane] : 0;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) before += __shfl_xor_sync(0xffffffffu, before, o);
  if (tid < E) offs[tid + 1] = before + v;
  if (tid == 0) offs[0] = 0;
}

// Thread e: turns column e of the count rows cnt[0..rows)[E] into each
// row's first position, `first` + the counts of the rows above, and returns
// the column's sum. Four rows are loaded before any is written back, so the
// chain is rows / 4 shared-memory latencies, not rows (the loads of one
// column could otherwise not pass its stores).
__device__ __forceinline__ int column_prefix(int* cnt, int rows, int E, int e, int first) {
  int run = first, w = 0;
#pragma unroll 1
  for (; w + 4 <= rows; w += 4) {
    const int c0 = cnt[w * E + e], c1 = cnt[(w + 1) * E + e], c2 = cnt[(w + 2) * E + e], c3 = cnt[(w + 3) * E + e];
    cnt[w * E + e] = run;
    cnt[(w + 1) * E + e] = run + c0;
    cnt[(w + 2) * E + e] = run + c0 + c1;
    cnt[(w + 3) * E + e] = run + c0 + c1 + c2;
    run += c0 + c1 + c2 + c3;
  }
#pragma unroll 1
  for (; w < rows; ++w) {
    const int c = cnt[w * E + e];
    cnt[w * E + e] = run;
    run += c;
  }
  return run - first;
}

// The ids of slots [chunk, chunk + W * kAhead) that fall before `end`
// (outside: -1), batch u in ev[u], loaded together: one load latency per
// chunk instead of one per batch (race-like shapes ran 11-21% faster, H200
// session 12).
__device__ __forceinline__ void load_chunk(const FusedMappingParams& p, long long chunk, long long end, int lane,
                                           int (&ev)[kAhead]) {
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    const long long i = chunk + u * W + lane;
    ev[u] = i < end ? __ldcg(p.ids + i) : -1;
  }
}

// A, one chunk (ids in ev, from load_chunk): its experts into cnt_row.
__device__ __forceinline__ void count_chunk(const int (&ev)[kAhead], int E, int* cnt_row) {
#pragma unroll
  for (int u = 0; u < kAhead; ++u)
    if (ev[u] >= 0 && ev[u] < E) atomicAdd(&cnt_row[ev[u]], 1);
}

// A. Warp `warp` counts the experts of slots [begin, end) into cnt[warp][E]
// (zeroed by the caller), a chunk at a time.
__device__ __forceinline__ void count_slots(const FusedMappingParams& p, long long begin, long long end, int* cnt_row,
                                            int lane) {
  int ev[kAhead];
  for (long long chunk = begin; chunk < end; chunk += W * kAhead) {
    load_chunk(p, chunk, end, lane, ev);
    count_chunk(ev, p.num_experts, cnt_row);
  }
}

// C, one chunk (ids in ev, from load_chunk): each slot of [chunk, end) gets
// its row. offs[e] + cnt_row[e] is the first row its expert-e slots take,
// and cnt_row[e] is advanced past them. Slot indices fit 32 bits (slots <=
// rows < 2^31, the host checks), so the token is a 32-bit division.
// A batch's rank among its same-expert lanes comes from match.any, or, where
// the caller knows the K slots of a token hold K distinct experts (the
// gate's own ids: kDistinct) and K >= 4, token by token: the lanes of one
// token never share an expert, so each takes cnt_row[e] and advances it, one
// token after the other (a short chain of shared-memory round trips). With
// every warp of the SM placing at once, match.any's latency was most of the
// placing (H200 session 25, ncu: DeepSeek-V3 T=256 placing ~2.6 us).
template <bool kDistinct>
__device__ __forceinline__ void place_chunk(const FusedMappingParams& p, long long chunk, long long end,
                                            const int (&ev)[kAhead], const int* offs, int* cnt_row, int lane) {
  const unsigned lanes_below = (1u << lane) - 1u;
  const unsigned K = unsigned(p.top_k);
  const bool by_token = kDistinct && K >= 4;
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    // Batches past the segment's end are skipped (warp-uniform): their
    // match.any ran for nothing.
    if (chunk + u * W >= end) break;
    const long long i = chunk + u * W + lane;
    const int e = ev[u];
    const bool valid = e >= 0 && e < p.num_experts;
    const unsigned token = unsigned(i) / K;
    int row = 0;
    if (by_token) {
      const unsigned t0 = unsigned(chunk + u * W) / K, t1 = unsigned(min(chunk + u * W + W, end) - 1) / K;
#pragma unroll 1
      for (unsigned q = t0; q <= t1; ++q) {
        if (valid && token == q) {
          const int c = cnt_row[e];
          row = offs[e] + c;
          cnt_row[e] = c + 1;
        }
        __syncwarp();
      }
    } else {
      const unsigned peers = __match_any_sync(0xffffffffu, valid ? e : -1);
      const int rank = __popc(peers & lanes_below);
      if (valid) row = offs[e] + cnt_row[e] + rank;
      __syncwarp();
      if (valid && rank == 0) cnt_row[e] += __popc(peers);
      __syncwarp();
    }
    if (valid) {
      p.token_topk_to_pos[i] = row;
      p.pos_to_token[row] = int(token);
    } else if (i < end) {
      p.token_topk_to_pos[i] = -1;
    }
  }
}

// C. Warp `warp` gives each slot of [begin, end) its row, a chunk at a time;
// ev holds the first chunk's ids already if `first_loaded`.
template <bool kDistinct = false>
__device__ __forceinline__ void place_slots(const FusedMappingParams& p, long long begin, long long end,
                                            const int* offs, int* cnt_row, int lane, int (&ev)[kAhead],
                                            bool first_loaded) {
  for (long long chunk = begin; chunk < end; chunk += W * kAhead) {
    if (chunk != begin || !first_loaded) load_chunk(p, chunk, end, lane, ev);
    place_chunk<kDistinct>(p, chunk, end, ev, offs, cnt_row, lane);
  }
}

// The expert owning row `row` (the last e with offs[e] <= row), or -1 past
// offs[E].
__device__ __forceinline__ int row_owner(const int* offs, int E, int row) {
  if (row >= offs[E]) return -1;
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offs[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Tile schedule for tiles [t0, t1), `stride` threads apart from thread `tid`.
__device__ __forceinline__ void own_tiles(const FusedMappingParams& p, const int* offs, int t0, int t1, int tid,
                                          int stride) {
  for (int tile = t0 + tid; tile < t1; tile += stride)
    p.tile_expert[tile] = row_owner(offs, p.num_experts, tile * p.block_m);
}
}  // namespace mapping

// The warps of the one-block mapping that take part in A and C: those with
// slots, at least 32 each (fewer count rows to scan at decode sizes).
__device__ __forceinline__ int mapping_used_warps(const FusedMappingParams& p) {
  return int(min((long long)kMappingWarps, max(1ll, (p.num_slots + Target::kWarpSize - 1) / Target::kWarpSize)));
}

// The one-block mapping's preparation, split over `parts` blocks (this is
// part `part`): this block zeroes the count rows in its own shared memory,
// and writes -1 to its share of pos_to_token (the placing overwrites the
// real rows). The gate+mapping kernel runs it in every block before the
// block signals done (the idle warps at once), so the last block's chain
// does not hold it: ~70 KB of stores at DeepSeek-V3 T=256. (H200 session
// 25, with the one-atomic signal: Qwen3-30B T=256 gate+mapping 14.1 ->
// 13.4 us, DeepSeek-V3 T=256 unchanged.)
// Visible to the block after its next barrier, and to other blocks after
// the release that follows.
__device__ __forceinline__ void prepare_mapping(const FusedMappingParams& p, int* smem, int part, int parts) {
  using namespace mapping;
  const int tid = threadIdx.x;
#pragma unroll 1
  for (int i = tid; i < mapping_used_warps(p) * p.num_experts; i += kMappingThreads) smem[i] = 0;
  long long r0, r1;
  split(p.rows, parts, part, r0, r1);
#pragma unroll 1
  for (int i = int(r0) + tid; i < int(r1); i += kMappingThreads) p.pos_to_token[i] = -1;
}

// The whole mapping by one block of kMappingThreads threads; smem holds
// (kWarps + 1) * E + 1 ints, the count rows zeroed and pos_to_token filled
// by prepare_mapping (whose writes are visible to every thread here). ids
// are read through L2 (ld.global.cg): in the fused gate+mapping kernel other
// blocks of the same launch wrote them.
// Only the warps with slots, at least 32 each, take part in A and C.
// E <= kMappingThreads (the host checks).
// Loops stay rolled where unrolling only repeats a pass: at decode sizes the
// kernel runs once, cold (H200, session 18: fetching code, not running it,
// set the gate's latency).
// Trace slots (compile option `trace`, thread 0): 5 counted, 6 offsets
// written, 7 its own warp placed, 8 its tile owners written.
template <bool kDistinct = false>
__device__ __forceinline__ void fused_mapping_block(const FusedMappingParams& p, int* smem) {
  using namespace mapping;
  constexpr int kWarps = kMappingWarps;
  const int E = p.num_experts;
  int* cnt = smem;                 // [used warps][E]
  int* offs = smem + kWarps * E;   // [E + 1]
  const int tid = threadIdx.x, warp = tid / W, lane = tid % W;
  const int used = mapping_used_warps(p);
  long long begin = 0, end = 0;
  if (warp < used) split(p.num_slots, used, warp, begin, end);

  // A warp whose segment is one chunk (up to 4096 slots in all) loads its
  // ids once, for A and C: one L2 round trip fewer at decode sizes.
  const bool one_chunk = end - begin <= W * kAhead;
  int ev[kAhead];
  if (one_chunk) {
    load_chunk(p, begin, end, lane, ev);
    count_chunk(ev, E, cnt + warp * E);
  } else {
    count_slots(p, begin, end, cnt + warp * E, lane);
  }
  __syncthreads();
  trace_stamp(5);

  // B. per expert (thread e): prefix over the count rows, total, offsets.
  int total = 0;
  if (tid < E) {
    total = column_prefix(cnt, used, E, tid, 0);
    p.tokens_per_expert[tid] = total;
  }
  scan_offsets((total + p.block_m - 1) / p.block_m * p.block_m, offs, E);
  __syncthreads();
  for (int e = tid; e <= E; e += kMappingThreads) p.expert_offsets[e] = offs[e];
  if (tid == 0) *p.num_tiles = offs[E] / p.block_m;
  trace_stamp(6);

  place_slots<kDistinct>(p, begin, end, offs, cnt + warp * E, lane, ev, one_chunk);
  trace_stamp(7);
  own_tiles(p, offs, 0, p.rows / p.block_m, tid, kMappingThreads);
  trace_stamp(8);
}

__global__ void __launch_bounds__(kMappingThreads, 1) fused_mapping_kernel(const FusedMappingParams p) {
  extern __shared__ int smem[];
  grid_dependency_begin();
  prepare_mapping(p, smem, 0, 1);
  __syncthreads();
  fused_mapping_block(p, smem);
}

// Several blocks, step 1: block b counts the experts of its slots into
// block_counts[b][E]. smem: E ints.
__global__ void __launch_bounds__(kMappingThreads, 1) mapping_count_kernel(const MappingBlocksParams args) {
  using namespace mapping;
  const FusedMappingParams& p = args.p;
  int* block_counts = args.block_counts;
  extern __shared__ int smem[];
  const int E = p.num_experts, tid = threadIdx.x;
  for (int e = tid; e < E; e += kMappingThreads) smem[e] = 0;
  grid_dependency_begin();
  __syncthreads();
  long long lo, hi;
  split(p.num_slots, gridDim.x, blockIdx.x, lo, hi);
  for (long long i = lo + tid; i < hi; i += kMappingThreads) {
    const int e = __ldcg(p.ids + i);
    if (e >= 0 && e < E) atomicAdd(&smem[e], 1);
  }
  __syncthreads();
  for (int e = tid; e < E; e += kMappingThreads) block_counts[(long long)blockIdx.x * E + e] = smem[e];
}

// Several blocks, step 2 (same grid as step 1). smem: (kWarps + 3) * E + 1
// ints: per-warp rows, offsets, totals, this block's bases.
__global__ void __launch_bounds__(kMappingThreads, 1) mapping_scatter_kernel(const MappingBlocksParams args) {
  using namespace mapping;
  const FusedMappingParams& p = args.p;
  const int* block_counts = args.block_counts;
  constexpr int kWarps = kMappingWarps;
  extern __shared__ int smem[];
  const int E = p.num_experts, tid = threadIdx.x, warp = tid / W, lane = tid % W;
  const int blocks = gridDim.x, b = blockIdx.x;
  int* cnt = smem;                // [kWarps][E]
  int* offs = cnt + kWarps * E;   // [E + 1]
  int* total = offs + E + 1;      // [E]
  int* base = total + E;          // [E]: the expert's slots in earlier blocks
  for (int i = tid; i < kWarps * E; i += kMappingThreads) cnt[i] = 0;
  grid_dependency_begin();
  __syncthreads();

  long long lo, hi, begin, end;
  split(p.num_slots, blocks, b, lo, hi);
  split(hi - lo, kWarps, warp, begin, end);
  begin += lo, end += lo;
  count_slots(p, begin, end, cnt + warp * E, lane);
  int all = 0;
  if (tid < E) {
    int before = 0;
    for (int k = 0; k < blocks; ++k) {
      const int c = __ldcg(block_counts + (long long)k * E + tid);
      if (k < b) before += c;
      all += c;
    }
    base[tid] = before;
    total[tid] = all;
  }
  scan_offsets((all + p.block_m - 1) / p.block_m * p.block_m, offs, E);
  __syncthreads();
  if (b == 0) {
    for (int e = tid; e < E; e += kMappingThreads) p.tokens_per_expert[e] = total[e];
    for (int e = tid; e <= E; e += kMappingThreads) p.expert_offsets[e] = offs[e];
    if (tid == 0) *p.num_tiles = offs[E] / p.block_m;
  }
  // Each warp's first row per expert past its offset: earlier blocks +
  // earlier warps.
  if (tid < E) column_prefix(cnt, kWarps, E, tid, base[tid]);
  __syncthreads();
  int ev[kAhead];
  place_slots(p, begin, end, offs, cnt + warp * E, lane, ev, false);

  // This block's share of rows: padding rows -1 (the real ones are placed
  // by the block owning their slot), and of tiles: their owners.
  long long r0, r1, t0, t1;
  split(p.rows, blocks, b, r0, r1);
  for (int r = int(r0) + tid; r < int(r1); r += kMappingThreads) {
    const int e = row_owner(offs, E, r);
    if (e < 0 || r - offs[e] >= total[e]) p.pos_to_token[r] = -1;
  }
  split(p.rows / p.block_m, blocks, b, t0, t1);
  own_tiles(p, offs, int(t0), int(t1), tid, kMappingThreads);
}

}  // namespace tc::moe
