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
// ran 25% slower at T = 16, H200, session 12). Its real rows (source row
// and layout row) are compacted into shared memory first. Warp w owns
// columns col0 + CPW w .. + CPW - 1; lane l reads 8-element chunks l,
// l + 32, ... along K of those columns' weight rows (layout NK: [N, K] per
// expert, rows contiguous along K) and of the pass's A rows, and the warp sums the partial dot products with shuffles. The
// epilogue is the GEMM's: silu(gate) * up when gated, times row_scale; a
// live tile's padding rows get zeros, as from the MMA kernels.
// Requires K % 8 == 0 and 16-byte aligned rows (the host's vector_ok).
#include "moe/grouped_gemm.cuh"
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
        Vec<T, 8> xv;
        if (rok[r]) *reinterpret_cast<uint4*>(&xv) = __ldg(reinterpret_cast<const uint4*>(arow[r] + 8 * q));
        else *reinterpret_cast<uint4*>(&xv) = make_uint4(0, 0, 0, 0);
        float xf[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) xf[j] = to_float(xv.v[j]);
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

  static __device__ __forceinline__ void run(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L) {
    const GroupedGemmParams& p = L.p;
    __shared__ int src[BM], pos[BM], count, all_src[BM];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles = p.num_tiles ? *p.num_tiles : (p.M + BM - 1) / BM;  // a last partial tile counts
    const int col_blocks = (p.N + kCols - 1) / kCols;
    const long long items = (long long)tiles * col_blocks;
    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
      const int tile = int(item / col_blocks), cb = int(item % col_blocks);
      const int e = p.tile_expert ? p.tile_expert[tile] : 0;
      if (e < 0 || e >= p.num_experts) continue;  // the same for the whole CTA
      __syncthreads();  // the previous item's rows have been read
      if (warp == 0) {
        const int row = tile * BM + lane;
        int s = -1;
        if (lane < BM && row < p.M) s = p.a_index ? p.a_index[row] : row;
        if (s >= 0 && p.row_token && p.row_token[row] < 0) s = -1;
        const bool ok = s >= 0 && s < p.a_rows;
        const unsigned mask = __ballot_sync(0xffffffffu, ok);
        const int at = __popc(mask & ((1u << lane) - 1u));
        if (ok) src[at] = s, pos[at] = row;
        if (lane < BM) all_src[lane] = ok ? s : -1;
        if (lane == 0) count = __popc(mask);
      }
      __syncthreads();
      const int rows = count;
      Item it;
#pragma unroll
      for (int m = 0; m < 2; ++m) it.w[m] = m < kB ? gemm_expert_weights<T, TABLE>(L, m, e) : nullptr;
      it.src = src, it.pos = pos;
      it.n0 = cb * kCols + warp * CPW;
      it.ncols = min(CPW, p.N - it.n0);
      // Passes of 4, 2 and 1 rows: a tile's weights are read once per pass,
      // and the FMAs of rows that do not exist are not issued at decode.
      int r0 = 0;
      for (; rows - r0 >= 3; r0 += 4) pass<4>(p, it, r0, rows);
      if (rows - r0 == 2) pass<2>(p, it, r0, rows);
      else if (rows - r0 == 1) pass<1>(p, it, r0, rows);
      // The tile's padding rows hold zeros (times the row scale), as the MMA
      // kernels write them: the contract covers every row of a live tile.
      for (int r = lane; r < BM && rows < BM; r += 32) {
        const int row = tile * BM + r;
        if (all_src[r] >= 0 || row >= p.M) continue;
        const float v = 0.f * (p.row_scale ? p.row_scale[row] : 1.f);
        for (int c = 0; c < it.ncols; ++c) static_cast<OutT*>(p.c)[(long long)row * p.ldc + it.n0 + c] = from_float<OutT>(v);
      }
    }
  }
};

template <typename T, typename OutT, int BM, int BN, bool DUAL, int TABLE>
__global__ void __launch_bounds__(256, grouped_gemv_min_ctas(BN, DUAL))
    grouped_gemv_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  grid_dependency_begin();
  GroupedGemv<T, OutT, BM, BN, DUAL, TABLE>::run(L);
}

}  // namespace tc::moe
