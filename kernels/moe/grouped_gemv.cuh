#pragma once
// moe_grouped_gemm, decode path (sm_80+): the contract of grouped_gemm.cuh,
// C[r, :] = epilogue(A[src(r), :] . W_e), for tile schedules whose tiles
// hold one to a few real rows (the layer at a handful of tokens, where a
// 16-row MMA tile is nearly all padding and the time is the read of the
// touched experts' weights). No tensor cores and no shared-memory ring: the
// weights stream straight into registers with 16-byte loads, so every lane
// keeps several in flight, and each weight element is read once per pass of
// up to 4 real rows.
//
// A CTA of 8 warps takes items (row tile, block of BN = 8 * CPW output columns),
// one CTA per item as launched (the hardware hands out the next item as a
// CTA ends, so the GPU sweeps the weights in order; a wave of CTAs over
// static contiguous ranges of items, each compacting a tile's rows once,
// ran 25% slower at T = 16, H200, session 12). Per-row schedules (BM = 1,
// every row one slot) instead split the flat columns (rows x N) evenly into
// one contiguous range per CTA; the host launches one CTA per item, or,
// where the items exceed what is resident at once, that many CTAs
// (balance): dynamic items left whole items' worth of imbalance between SMs
// there (DeepSeek-V3 T = 1 under ncu: the busiest SM active 4% longer than
// the average for gate/up, 18% for the combined down projection). A range
// is walked in items of at most BN columns that stay within one row. An
// item's real rows (source row and layout row) are compacted into shared
// memory first. Warp w owns columns col0 + CPW w .. + CPW - 1; lane l reads
// 8-element chunks l, l + 32, ... along K of those columns' weight rows
// (layout NK: [N, K] per expert, rows contiguous along K) and of the pass's
// A rows, and the warp sums the partial dot products with shuffles. The
// epilogue is the GEMM's: silu(gate) * up when gated, times row_scale; a
// live tile's padding rows get zeros, as from the MMA kernels.
// Requires K % 8 == 0 and 16-byte aligned rows (the host's vector_ok).
#include "moe/grouped_gemm.cuh"
#include "tile/mbarrier.cuh"
#include "tile/trace.cuh"
#include "tile/vec.cuh"

namespace tc::moe {

// CTAs per SM the kernel is built for. Narrow items (half the default
// columns: BN 16 gated, 32 plain) are there to spread small launches
// evenly, so on sm_90 they take 3 CTAs per SM: 384 items (Qwen3-30B T=1's
// gate/up) then fit one wave of 396 instead of 1.5 waves at 2 per SM. Not
// on sm_80, where they spilled at 3.
__host__ __device__ constexpr int grouped_gemv_min_ctas(int bn, bool dual) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  return (void)bn, (void)dual, 2;
#else
  return bn == (dual ? 16 : 32) ? 3 : 2;
#endif
}

// The row of A that layout row `row` reads (-1: padding).
__device__ __forceinline__ int gemv_a_row(const GroupedGemmParams& p, int row) {
  return p.a_index ? p.a_index[row] : p.a_repeat > 1 ? row / p.a_repeat : row;
}

// This CTA's share [begin, end) of `total` flat columns: contiguous ranges
// that differ by at most one column. (The host keeps total below 2^31: 32-bit
// offsets leave the inner loops their registers.)
__device__ __forceinline__ void gemv_cta_range(int total, int& begin, int& end) {
  begin = int((long long)total * blockIdx.x / gridDim.x);
  end = int((long long)total * (blockIdx.x + 1) / gridDim.x);
}

// Hands `bytes` (a multiple of 16, 16-byte aligned) at `ptr` to the L2 to
// fetch, without waiting (sm_90: one bulk prefetch; nothing elsewhere).
__device__ __forceinline__ void gemv_prefetch_l2(const void* ptr, long long bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (bytes > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(unsigned(bytes)) : "memory");
#else
  (void)ptr, (void)bytes;
#endif
}

// Up to max_bytes (a multiple of 16) of the weight rows [n0, n0 + cols) of
// expert e's (only) matrix (layout NK: one contiguous block) into L2; e
// outside the experts is skipped.
template <typename T, int TABLE>
__device__ __forceinline__ void gemv_prefetch_rows(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, int e, int n0,
                                                   int cols, long long max_bytes) {
  const GroupedGemmParams& p = L.p;
  if (e < 0 || e >= p.num_experts || n0 >= p.N) return;
  cols = min(cols, p.N - n0);
  gemv_prefetch_l2(gemm_expert_weights<T, TABLE>(L, 0, e) + (long long)n0 * p.ldb,
                   min((long long)cols * p.ldb * (long long)sizeof(T), max_bytes));
}

// 8 elements of an A row from `ptr` as fp32 (zeros where !ok).
template <typename T>
__device__ __forceinline__ void gemv_load_a8(const T* ptr, bool ok, float (&xf)[8]) {
  Vec<T, 8> xv;
  if (ok) *reinterpret_cast<uint4*>(&xv) = __ldg(reinterpret_cast<const uint4*>(ptr));
  else *reinterpret_cast<uint4*>(&xv) = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int j = 0; j < 8; ++j) xf[j] = to_float(xv.v[j]);
}

template <typename T, typename OutT, int BM, int BN, bool DUAL, int TABLE>
struct GroupedGemv {
  static constexpr int kWarps = 8, kThreads = kWarps * 32;
  static constexpr int kB = DUAL ? 2 : 1;
  static constexpr int kCols = BN;           // per item
  static constexpr int CPW = BN / kWarps;    // output columns per warp
  static constexpr int kRowsPerStep = kB * CPW;  // weight rows a lane loads per K step
  // Half the default columns per item on sm_90: 3 CTAs per SM (80
  // registers; see grouped_gemv_min_ctas), and at decode the most loads in
  // flight per lane that fit them without spills (gated 8 spilled 4 bytes),
  // instead of 16.
  static constexpr bool kNarrow = grouped_gemv_min_ctas(BN, DUAL) == 3;
  static constexpr int kLoadsInFlight = !kNarrow ? 16 : DUAL ? 4 : 8;
  static_assert(BN % kWarps == 0 && kRowsPerStep >= 2 && kRowsPerStep <= 8, "2 to 8 weight rows per lane step");
  static_assert(sizeof(T) == 2, "16-bit inputs");
  static_assert(BM <= 32, "one warp compacts a tile's rows");

  struct Item {
    const T* w[2];
    const int* src;  // [rows] compacted source rows of A
    const int* pos;  // [rows] their layout rows
    int n0;          // this warp's first column
    int ncols;       // of its CPW columns, those inside N (<= 0 for warps past the last column)
  };

  // One pass over K for real rows r0 .. r0 + R - 1 (those past `rows` read
  // zeros and store nothing).
  template <int R>
  static __device__ __forceinline__ void pass(const GroupedGemmParams& p, const Item& it, int r0, int rows) {
    const int lane = threadIdx.x % 32;
    const T* a = static_cast<const T*>(p.a);
    const T* arow[R];
    bool rok[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      rok[r] = r0 + r < rows;
      arow[r] = a + (long long)(rok[r] ? it.src[r0 + r] : 0) * p.lda;
    }
    // The warp's first weight row per matrix; column c is c rows further
    // (one pointer per matrix, not per column: registers are the limit here).
    const int ncols = it.ncols;
    const T* wrow[kB];
#pragma unroll
    for (int m = 0; m < kB; ++m) wrow[m] = it.w[m] + (long long)(ncols > 0 ? it.n0 : 0) * p.ldb;
    float acc[kB][CPW][R];
#pragma unroll
    for (int m = 0; m < kB; ++m)
#pragma unroll
      for (int c = 0; c < CPW; ++c)
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][c][r] = 0.f;

    const int chunks = p.K / 8;
    // K steps unrolled to kLoadsInFlight loads of 16 bytes in flight per
    // lane in the 1-row passes (decode); none in the wider passes, whose
    // accumulators would not fit 128 registers (2 CTAs of 256 per SM) next
    // to more loads (they spilled, on sm_80 even at 8 loads).
    constexpr int kUnroll = R >= 2 ? 1 : kLoadsInFlight / kRowsPerStep;
#pragma unroll kUnroll
    for (int q = lane; q < chunks; q += 32) {
      // Weights first (streamed once, not kept in L1), then the A rows
      // (shared by every warp and CTA of the tile: cached).
      Vec<T, 8> wv[kB][CPW];
#pragma unroll
      for (int m = 0; m < kB; ++m)
#pragma unroll
        for (int c = 0; c < CPW; ++c)
          wv[m][c] = load_stream_if<T, 8, true>(wrow[m] + c * p.ldb + 8 * q, c < ncols);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float xf[8];
        gemv_load_a8(arow[r] + 8 * q, rok[r], xf);
#pragma unroll
        for (int m = 0; m < kB; ++m)
#pragma unroll
          for (int c = 0; c < CPW; ++c)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[m][c][r] = fmaf(to_float(wv[m][c].v[j]), xf[j], acc[m][c][r]);
      }
    }
    // Every lane ends with every sum; lane c * R + r stores (column c, row r).
#pragma unroll
    for (int m = 0; m < kB; ++m)
#pragma unroll
      for (int c = 0; c < CPW; ++c)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int off = 16; off > 0; off >>= 1) acc[m][c][r] += __shfl_xor_sync(0xffffffffu, acc[m][c][r], off);
#pragma unroll
    for (int c = 0; c < CPW; ++c)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (lane != c * R + r || !rok[r] || c >= ncols) continue;
        const int row = it.pos[r0 + r];
        float v = acc[0][c][r];
        if constexpr (DUAL) v = gemm_silu(v) * acc[kB - 1][c][r];
        if (p.row_scale) v *= p.row_scale[row];
        static_cast<OutT*>(p.c)[(long long)row * p.ldc + it.n0 + c] = from_float<OutT>(v);
      }
  }

  // Rows of `tile` (BM layout rows) to shared memory: src/pos of the real
  // ones in order, all_src of every row (-1: padding), count. Warp 0.
  static __device__ __forceinline__ void compact(const GroupedGemmParams& p, int tile, int* src, int* pos, int* all_src,
                                                 int& count) {
    const int lane = threadIdx.x % 32;
    const int row = tile * BM + lane;
    int s = -1;
    if (lane < BM && row < p.M) s = gemv_a_row(p, row);
    if (s >= 0 && p.row_token && p.row_token[row] < 0) s = -1;
    const bool ok = s >= 0 && s < p.a_rows;
    const unsigned mask = __ballot_sync(0xffffffffu, ok);
    const int at = __popc(mask & ((1u << lane) - 1u));
    if (ok) src[at] = s, pos[at] = row;
    if (lane < BM) all_src[lane] = ok ? s : -1;
    if (lane == 0) count = __popc(mask);
  }

  // Columns [c0, c0 + cols) of `tile` (expert e), whose `rows` real rows
  // are compacted in src/pos/all_src.
  static __device__ __forceinline__ void item(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, int e, int tile, int c0,
                                              int cols, int rows, const int* src, const int* pos, const int* all_src) {
    const GroupedGemmParams& p = L.p;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    Item it;
#pragma unroll
    for (int m = 0; m < 2; ++m) it.w[m] = m < kB ? gemm_expert_weights<T, TABLE>(L, m, e) : nullptr;
    it.src = src, it.pos = pos;
    it.n0 = c0 + warp * CPW;
    it.ncols = min(CPW, c0 + cols - it.n0);
    // Passes of 4, 2 and 1 rows: a tile's weights are read once per pass,
    // and the FMAs of rows that do not exist are not issued at decode.
    // (Per-row schedules, BM = 1, build the 1-row pass only.)
    int r0 = 0;
    if constexpr (BM >= 3)
      for (; rows - r0 >= 3; r0 += 4) pass<4>(p, it, r0, rows);
    if constexpr (BM >= 2)
      if (rows - r0 == 2) pass<2>(p, it, r0, rows);
    if (rows - r0 == 1) pass<1>(p, it, r0, rows);
    // The tile's padding rows hold zeros (times the row scale), as the MMA
    // kernels write them: the contract covers every row of a live tile.
    for (int r = lane; r < BM && rows < BM; r += 32) {
      const int row = tile * BM + r;
      if (all_src[r] >= 0 || row >= p.M) continue;
      const float v = 0.f * (p.row_scale ? p.row_scale[row] : 1.f);
      for (int c = 0; c < it.ncols; ++c)
        static_cast<OutT*>(p.c)[(long long)row * p.ldc + it.n0 + c] = from_float<OutT>(v);
    }
  }

  static __device__ __forceinline__ void run(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L) {
    const GroupedGemmParams& p = L.p;
    __shared__ int src[BM], pos[BM], count, all_src[BM];
    const int warp = threadIdx.x / 32;
    const int tiles = p.num_tiles ? *p.num_tiles : (p.M + BM - 1) / BM;  // a last partial tile counts
    if constexpr (BM == 1) {
      // Per-row schedule: this CTA's contiguous range of the flat columns.
      int at, end;
      gemv_cta_range(tiles * p.N, at, end);
      int cur = -1, e = -1;
      while (at < end) {
        const int tile = int(at / p.N), c0 = int(at % p.N);
        const int cols = min(min(kCols, p.N - c0), end - at);
        at += cols;
        if (tile != cur) {
          cur = tile;
          e = p.tile_expert ? p.tile_expert[tile] : 0;  // the same for the whole CTA
          if (e < 0 || e >= p.num_experts) {
            at = max(at, min(end, (tile + 1) * p.N));  // skip the rest of the row
            continue;
          }
          __syncthreads();  // the previous row's compaction has been read
          if (warp == 0) compact(p, tile, src, pos, all_src, count);
          __syncthreads();
        }
        item(L, e, tile, c0, cols, count, src, pos, all_src);
      }
    } else {
      const int col_blocks = (p.N + kCols - 1) / kCols;
      const long long items = (long long)tiles * col_blocks;
      for (long long i = blockIdx.x; i < items; i += gridDim.x) {
        const int tile = int(i / col_blocks), cb = int(i % col_blocks);
        const int e = p.tile_expert ? p.tile_expert[tile] : 0;
        if (e < 0 || e >= p.num_experts) continue;  // the same for the whole CTA
        __syncthreads();                            // the previous item's rows have been read
        if (warp == 0) compact(p, tile, src, pos, all_src, count);
        __syncthreads();
        item(L, e, tile, cb * kCols, min(kCols, p.N - cb * kCols), count, src, pos, all_src);
      }
    }
  }
};

// Trace slots (compile option `trace`): thread 0 at entry (0), past the
// dependency wait (1), and when the CTA's every item is done (2).
template <typename T, typename OutT, int BM, int BN, bool DUAL, int TABLE>
__global__ void __launch_bounds__(256, grouped_gemv_min_ctas(BN, DUAL))
    grouped_gemv_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  using G = GroupedGemv<T, OutT, BM, BN, DUAL, TABLE>;
  trace_stamp(0);
  grid_dependency_begin();
  trace_stamp(1);
  G::run(L);
  trace_stamp_all_done(2);
}

// The decode path's down projection with the combine fused in (p.combine =
// S slots per output row, a per-row schedule: tile_expert[row] is row's
// expert): out[t, n] = sum over j < S, in order, of row_scale[row] *
// round(A[row] . W_e[n]), row = t * S + j: each slot's product is rounded to
// the output type first, as a separate down projection would store it, so
// the result has the mapped path's rounding; the sum is in fp32 and rounded
// once. Rows whose expert is outside [0, num_experts) add nothing (their A
// rows are never read).
//
// A CTA of 8 warps takes a contiguous range of the flat output columns
// (M / S rows x N; see GroupedGemv), in items of at most BN columns within
// one output row t. Warps split an item by (slot, part of K): with S < 8
// slots, G = 8 / S warps share a slot's K; each streams BN weight rows and
// the slot's A row, so a lane keeps BN (x the unroll) 16-byte loads in
// flight. Warp sums go to shared memory, and thread c then adds column c's
// parts and slots in a fixed order: deterministic. Requires K % 8 == 0,
// 16-byte aligned rows, layout NK.
template <typename T, typename OutT, int BN, int TABLE>
struct GroupedGemvCombine {
  static constexpr int kWarps = 8;
  static constexpr int kMaxSlots = 32;                   // fused_moe's top_k limit
  static constexpr int kUnroll = BN >= 16 ? 1 : 16 / BN;  // 16 weight loads in flight per lane
  static_assert(BN == 8 || BN == 16, "8 or 16 columns per item");
  static_assert(sizeof(T) == 2, "16-bit inputs");

  // This CTA's range of the flat output columns.
  static __device__ __forceinline__ void range(const GroupedGemmParams& p, int& begin, int& end) {
    gemv_cta_range(p.M / p.combine * p.N, begin, end);
  }

  // The weights of the item at flat column `at` into L2.
  static __device__ __forceinline__ void prefetch(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, int at) {
    const GroupedGemmParams& p = L.p;
    const int S = p.combine, t = int(at / p.N), n0 = int(at % p.N);
    if (threadIdx.x >= S || threadIdx.x >= kMaxSlots) return;
    gemv_prefetch_rows<T, TABLE>(L, p.tile_expert[t * S + threadIdx.x], n0, BN, p.prefetch);
  }

  // An item's slots: weight bases, A rows, scales (shared by the CTA).
  struct Slots {
    const T* wbase[kMaxSlots];
    const T* arow[kMaxSlots];
    float scale[kMaxSlots];
  };

  // Output row t's slots into `sl` (threads < S; the caller syncs). Reads
  // the schedule, a_index and row scales only, never A: with a settled
  // schedule it may run before the grid wait.
  static __device__ __forceinline__ void setup(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, int t, Slots& sl) {
    const GroupedGemmParams& p = L.p;
    if (threadIdx.x >= p.combine) return;
    const int row = t * p.combine + threadIdx.x;
    const int e = p.tile_expert[row], s = gemv_a_row(p, row);
    const bool ok = e >= 0 && e < p.num_experts && s >= 0 && s < p.a_rows;
    sl.wbase[threadIdx.x] = ok ? gemm_expert_weights<T, TABLE>(L, 0, e) : nullptr;
    sl.arow[threadIdx.x] = ok ? static_cast<const T*>(p.a) + (long long)s * p.lda : nullptr;
    sl.scale[threadIdx.x] = p.row_scale ? p.row_scale[row] : 1.f;
  }

  // Thread 0, before the grid wait (sm_90, settled schedule, p.preload >
  // 0): the first item's weight rows of every slot into `smem` by bulk
  // copies (slot j's rows at j * BN * K elements), completing on `bar`. The
  // weights are never written by an earlier kernel, so they may be read
  // early; the CTA's share then streams while the previous kernel drains.
  static __device__ __forceinline__ void preload(const GroupedGemmParams& p, const Slots& sl, T* smem,
                                                 unsigned long long* bar) {
    int begin, end;
    range(p, begin, end);
    const int n0 = begin % p.N, ncols = min(min(BN, p.N - n0), end - begin), S = p.combine;
    const unsigned bytes = unsigned(ncols) * unsigned(p.K) * 2u;
    unsigned total = 0;
    for (int j = 0; j < S; ++j) total += sl.wbase[j] ? bytes : 0u;
    mbar_arrive_expect_tx(bar, total);
    for (int j = 0; j < S; ++j)
      if (sl.wbase[j]) bulk_load(smem + (long long)j * BN * p.K, sl.wbase[j] + (long long)n0 * p.ldb, bytes, bar);
  }

  // One slot's (or K part's) BN dot products of an item: weight rows from
  // global memory, or (SMEM) from the preloaded rows `w` (row c at c * K).
  template <bool SMEM>
  static __device__ __forceinline__ void dot(const GroupedGemmParams& p, const T* w, const T* a, int q0, int q1,
                                             int n0, int ncols, float (&acc)[BN]) {
    const int lane = threadIdx.x % 32;
#pragma unroll kUnroll
    for (int q = q0 + lane; q < q1; q += 32) {
      Vec<T, 8> wv[BN];
#pragma unroll
      for (int c = 0; c < BN; ++c) {
        if constexpr (SMEM) {
          if (c < ncols) wv[c] = load_shared<T, 8>(w + (long long)c * p.K + 8 * q);
          else wv[c] = Vec<T, 8>{};
        } else {
          wv[c] = load_stream_if<T, 8, true>(w + (long long)(n0 + c) * p.ldb + 8 * q, c < ncols);
        }
      }
      float xf[8];
      gemv_load_a8(a + 8 * q, true, xf);
#pragma unroll
      for (int c = 0; c < BN; ++c)
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[c] = fmaf(to_float(wv[c].v[k]), xf[k], acc[c]);
    }
  }

  // first_ready: the slots of the range's first row are in `sl` already.
  // pre (or null): the first item's weights, preloaded into shared memory,
  // complete when `bar` passes phase 0.
  static __device__ __forceinline__ void run(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, Slots& sl,
                                             bool first_ready, const T* pre, unsigned long long* bar) {
    const GroupedGemmParams& p = L.p;
    const T* const* wbase = sl.wbase;
    const T* const* arow = sl.arow;
    const float* scale = sl.scale;
    __shared__ float part[kMaxSlots][BN];  // [slot * G + K part][column]; S * G <= max(S, 8)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int S = p.combine;
    const int G = S >= kWarps ? 1 : kWarps / S, chunks = p.K / 8;
    int at, end;
    range(p, at, end);
    int cur = first_ready && at < end ? at / p.N : -1;  // the output row whose slots `sl` holds
    for (bool first = true; at < end; first = false) {
      const int t = at / p.N, n0 = at % p.N;
      const int ncols = min(min(BN, p.N - n0), end - at);
      at += ncols;
      if (!first) __syncthreads();  // the previous item's slots and parts have been read
      if (t != cur) setup(L, t, sl), cur = t;
      const bool from_smem = first && pre != nullptr;
      if (from_smem) mbar_wait(bar, 0);  // the preloaded rows have landed
      __syncthreads();
      for (int sw = warp; sw < S * G; sw += kWarps) {
        const int j = sw / G, kp = sw % G;
        const T* w = wbase[j];
        const T* a = arow[j];
        float acc[BN];
#pragma unroll
        for (int c = 0; c < BN; ++c) acc[c] = 0.f;
        if (w != nullptr) {
          const int q0 = int((long long)chunks * kp / G), q1 = int((long long)chunks * (kp + 1) / G);
          if (from_smem) dot<true>(p, pre + (long long)j * BN * p.K, a, q0, q1, n0, ncols, acc);
          else dot<false>(p, w, a, q0, q1, n0, ncols, acc);
        }
#pragma unroll
        for (int c = 0; c < BN; ++c)
#pragma unroll
          for (int off = 16; off > 0; off >>= 1) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], off);
#pragma unroll
        for (int c = 0; c < BN; ++c)
          if (lane == c) part[sw][c] = acc[c];
      }
      __syncthreads();
      if (threadIdx.x < ncols) {
        const int c = threadIdx.x;
        float o = 0.f;
        for (int j = 0; j < S; ++j) {
          if (wbase[j] == nullptr) continue;
          float y = 0.f;
          for (int kp = 0; kp < G; ++kp) y += part[j * G + kp][c];
          o = fmaf(scale[j], to_float(from_float<OutT>(y)), o);
        }
        static_cast<OutT*>(p.c)[(long long)t * p.ldc + n0 + c] = from_float<OutT>(o);
      }
    }
  }
};

// Trace slots: thread 0 at entry (0), past the dependency wait (1), and
// when the CTA's every item is done (2).
template <typename T, typename OutT, int BN, int TABLE>
__global__ void __launch_bounds__(256, 2) grouped_gemv_combine_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  using G = GroupedGemvCombine<T, OutT, BN, TABLE>;
  __shared__ typename G::Slots slots;
  __shared__ unsigned long long preload_bar;
  extern __shared__ __align__(128) char preload_smem[];  // p.preload bytes
  trace_stamp(0);
  // A settled schedule (prefetch != 0): the first item's slots, and with
  // prefetch > 0 its weights into L2, or with p.preload (sm_90) into shared
  // memory, before waiting on the previous kernel.
  int begin, end;
  G::range(L.p, begin, end);
  const bool settled = L.p.prefetch != 0 && begin < end;
  if (settled) {
    if (L.p.prefetch > 0) G::prefetch(L, begin);
    G::setup(L, begin / L.p.N, slots);
  }
  T* pre = nullptr;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (settled && L.p.preload > 0) {
    if (threadIdx.x == 0) mbar_init(&preload_bar, 1), mbar_init_fence();
    __syncthreads();  // the slots (threads < S) and the barrier
    pre = reinterpret_cast<T*>(preload_smem);
    if (threadIdx.x == 0) G::preload(L.p, slots, pre, &preload_bar);
  }
#endif
  grid_dependency_begin();
  trace_stamp(1);
  G::run(L, slots, settled, pre, &preload_bar);
  trace_stamp_all_done(2);
}

}  // namespace tc::moe
