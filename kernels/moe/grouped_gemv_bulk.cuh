#pragma once
// moe_grouped_gemm, decode path on sm_90: the two per-row decode
// projections of grouped_gemv.cuh (MODE 0: gated, block_m = 1, one layout
// row per slot; MODE 1: plain with the combine fused in) with the weights
// streamed through shared memory by bulk copies instead of register loads.
// Same contract and rounding as GroupedGemv / GroupedGemvCombine (the fp32
// sums run in another order, so not the same bits).
//
// Why: a register-load GEMV keeps only as many 16-byte loads in flight per
// lane as its registers hold next to the accumulators; a bulk-copy ring
// keeps a whole ring of stages in flight per SM at no register cost. On the
// H200, reading 705 MB cold (DeepSeek-V3 T = 1's experts) took 176-178 us by
// register loads against 165.5 us through a 6 x 32 KB ring, and 25 MB 10.3
// against 8.0 us (scripts/bw_bulk.cu).
//
// One CTA per SM: warp 8 (one lane) produces, warps 0 .. stages-1 consume,
// warp w every piece that lands in stage w, so each stage's phases are
// waited on in order by one warp and no barrier spans warps. The CTA takes
// an even contiguous range of the flat output columns (rows x N), in pieces
// of up to p.bulk_cols columns within one output row. A piece is U weight
// rows per column (MODE 0: U = 2, gate and up of the row's expert; MODE 1:
// U = S slots, one expert each), copied unit by unit (a unit's columns are
// consecutive rows of one matrix, contiguous at ldb = K) into one stage,
// laid out [unit][column][K]. The warp dots the piece's rows four at a time
// (lane l takes 8-element chunks l, l + 32, ... of each, the A rows through
// L1), sums each row with shuffles, releases the stage, and lanes c <
// columns finish column c in a fixed order: deterministic. One warp per
// piece keeps up to 8 pieces in flight per SM; a CTA-wide barrier per piece
// (the first version) serialised them and ran at half the register kernels'
// speed.
//
// The producer reads the schedule only: in MODE 1 with a settled schedule
// (p.prefetch != 0, see GroupedGemmParams) it starts before the grid wait,
// so the down weights stream while the previous kernel (gate/up) drains.
#include "moe/grouped_gemv.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/mbarrier.cuh"

namespace tc::moe {

constexpr int kBulkMaxStages = 8;
constexpr int kBulkConsumers = 256;                 // warps 0-7 (those past the stage count idle)
constexpr int kBulkThreads = kBulkConsumers + 32;   // + the producer warp
constexpr int kBulkMaxRows = 64;                    // weight rows per piece (units x columns), the host keeps it

template <typename T, typename OutT, int MODE, int TABLE>
struct GroupedGemvBulk {
  static_assert(sizeof(T) == 2, "16-bit inputs");
  static constexpr int kMaxUnits = MODE == 0 ? 2 : 32;

  struct Piece {
    int t;      // output row (MODE 0: the layout row); -1 ends the stream
    int n0;     // first column
    int cols;   // columns in this piece
  };
  // Per consumer warp: its current output row's units and its row sums.
  struct Warp {
    const T* arow[kMaxUnits];  // A rows, null = the unit adds nothing
    float scale[kMaxUnits];
    float sum[kBulkMaxRows];   // the piece's row dot products
  };
  struct Shared {
    unsigned long long full[kBulkMaxStages], empty[kBulkMaxStages];
    Piece piece[kBulkMaxStages];
    const T* w[kMaxUnits];  // the producer's current output row: weights, null = nothing to copy
    Warp warp[kBulkMaxStages];
  };

  static __device__ __forceinline__ int units(const GroupedGemmParams& p) { return MODE == 0 ? 2 : p.combine; }
  static __device__ __forceinline__ int out_rows(const GroupedGemmParams& p) {
    return MODE == 0 ? p.M : p.M / p.combine;
  }
  // The layout row of unit u of output row t.
  static __device__ __forceinline__ int layout_row(const GroupedGemmParams& p, int t, int u) {
    return MODE == 0 ? t : t * p.combine + u;
  }
  // Unit u of output row t: its weight matrix's first row (column 0), or
  // null where the row's expert or A row is outside the problem.
  static __device__ __forceinline__ const T* unit_weights(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, int t,
                                                          int u) {
    const GroupedGemmParams& p = L.p;
    const int row = layout_row(p, t, u), e = p.tile_expert[row], s = gemv_a_row(p, row);
    if (e < 0 || e >= p.num_experts || s < 0 || s >= p.a_rows) return nullptr;
    return gemm_expert_weights<T, TABLE>(L, MODE == 0 ? u : 0, e);
  }

  // Waits until piece k's stage is free again (its use S pieces earlier
  // was released).
  static __device__ __forceinline__ int claim(Shared& sh, unsigned k, int S) {
    const int s = k % S;
    if (k >= unsigned(S)) mbar_wait(&sh.empty[s], (k / S - 1) & 1);
    return s;
  }

  static __device__ __forceinline__ void produce(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, Shared& sh,
                                                 T* ring) {
    const GroupedGemmParams& p = L.p;
    const int U = units(p), S = p.bulk_stages;
    const long long stage_elems = (long long)p.bulk_cols * U * p.K;
    int at, end;
    gemv_cta_range(out_rows(p) * p.N, at, end);
    const T** w = sh.w;  // (shared memory: a local array indexed at run time would take a stack frame)
    int cur = -1;
    bool any = false;
    unsigned k = 0;
    for (; at < end;) {
      const int t = at / p.N, n0 = at % p.N, cols = min(min(p.bulk_cols, p.N - n0), end - at);
      at += cols;
      if (t != cur) {
        cur = t, any = false;
        for (int u = 0; u < U; ++u) any |= (w[u] = unit_weights(L, t, u)) != nullptr;
      }
      if (MODE == 0 && !any) continue;  // no expert: the row is skipped (nothing stored)
      const int s = claim(sh, k++, S);
      sh.piece[s] = Piece{t, n0, cols};
      const unsigned unit_bytes = unsigned(cols) * unsigned(p.K) * sizeof(T);
      unsigned bytes = 0;
      for (int u = 0; u < U; ++u) bytes += w[u] ? unit_bytes : 0u;
      mbar_arrive_expect_tx(&sh.full[s], bytes);
      T* stage = ring + s * stage_elems;
      for (int u = 0; u < U; ++u)
        if (w[u]) bulk_load(stage + (long long)u * cols * p.K, w[u] + (long long)n0 * p.ldb, unit_bytes, &sh.full[s]);
    }
    for (int i = 0; i < S; ++i) {  // every consumer warp's end
      const int s = claim(sh, k++, S);
      sh.piece[s].t = -1;
      mbar_arrive(&sh.full[s]);
    }
  }

  // Consumer warp `warp` (< p.bulk_stages): the pieces of stage `warp`.
  static __device__ __forceinline__ void consume(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, Shared& sh,
                                                 const T* ring, int warp) {
    const GroupedGemmParams& p = L.p;
    const int U = units(p), S = p.bulk_stages, chunks = p.K / 8, lane = threadIdx.x % 32;
    const T* stage = ring + (long long)warp * p.bulk_cols * U * p.K;
    Warp& me = sh.warp[warp];
    int cur = -1;
    for (unsigned use = 0;; ++use) {
      mbar_wait(&sh.full[warp], use & 1);
      const Piece pc = sh.piece[warp];
      if (pc.t < 0) break;
      if (pc.t != cur) {
        __syncwarp();  // the previous piece's epilogue has read the units
        for (int u = lane; u < U; u += 32) {
          const int row = layout_row(p, pc.t, u);
          const bool ok = unit_weights(L, pc.t, u) != nullptr;
          me.arow[u] = ok ? static_cast<const T*>(p.a) + (long long)gemv_a_row(p, row) * p.lda : nullptr;
          me.scale[u] = p.row_scale ? p.row_scale[row] : 1.f;
        }
        __syncwarp();
        cur = pc.t;
      }
      // Row r of the piece: unit r / cols, column r % cols; 4 rows at a time
      // (independent sums, each split over even and odd chunks).
      const int R = U * pc.cols;
      for (int r0 = 0; r0 < R; r0 += 4) {
        float acc[4][2];
        const T* a[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[i][0] = acc[i][1] = 0.f;
          a[i] = r0 + i < R ? me.arow[MODE == 0 ? 0 : (r0 + i) / pc.cols] : nullptr;
        }
#pragma unroll 2
        for (int q = lane; q < chunks; q += 32) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (a[i] == nullptr) continue;
            const Vec<T, 8> wv = load_shared_if<T, 8>(stage + (long long)(r0 + i) * p.K + 8 * q, true);
            float xf[8];
            gemv_load_a8<T>(a[i] + 8 * q, true, xf);
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j & 1] = fmaf(to_float(wv.v[j]), xf[j], acc[i][j & 1]);
          }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float v = acc[i][0] + acc[i][1];
#pragma unroll
          for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
          if (lane == 0 && r0 + i < R) me.sum[r0 + i] = a[i] != nullptr ? v : 0.f;
        }
      }
      __syncwarp();  // the stage is read, the sums written
      if (lane == 0) mbar_arrive(&sh.empty[warp]);
      for (int c = lane; c < pc.cols; c += 32) {
        float v;
        if constexpr (MODE == 0) {
          v = gemm_silu(me.sum[c]) * me.sum[pc.cols + c];
          if (p.row_scale) v *= me.scale[0];
        } else {
          v = 0.f;
          for (int u = 0; u < U; ++u)
            if (me.arow[u] != nullptr) v = fmaf(me.scale[u], to_float(from_float<OutT>(me.sum[u * pc.cols + c])), v);
        }
        static_cast<OutT*>(p.c)[(long long)pc.t * p.ldc + pc.n0 + c] = from_float<OutT>(v);
      }
    }
  }
};

template <typename T, typename OutT, int MODE, int TABLE>
__global__ void __launch_bounds__(kBulkThreads, 1) grouped_gemv_bulk_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  using G = GroupedGemvBulk<T, OutT, MODE, TABLE>;
  extern __shared__ __align__(128) unsigned char ring_bytes[];
  __shared__ typename G::Shared sh;
  if (threadIdx.x == 0) {
    for (int s = 0; s < L.p.bulk_stages; ++s) mbar_init(&sh.full[s], 1), mbar_init(&sh.empty[s], 1);
    mbar_init_fence();
  }
  __syncthreads();
  T* ring = reinterpret_cast<T*>(ring_bytes);
  if (threadIdx.x >= kBulkConsumers) {
    if (threadIdx.x != kBulkConsumers) return;
    // The producer reads only the schedule: before the wait where it was
    // settled before the previous kernel began.
    if (MODE == 0 || L.p.prefetch == 0) grid_dependency_wait();
    grid_dependency_launch_dependents();
    G::produce(L, sh, ring);
    return;
  }
  grid_dependency_begin();
  const int warp = threadIdx.x / 32;
  if (warp < L.p.bulk_stages) G::consume(L, sh, ring, warp);
}

}  // namespace tc::moe
