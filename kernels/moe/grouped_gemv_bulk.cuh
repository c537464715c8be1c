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
// One CTA per SM: warp 16 (one lane) produces; warps 2s and 2s + 1 consume
// every piece that lands in stage s (s < stages), so each stage's phases are
// waited on in order by its own pair. The CTA takes an even contiguous range
// of the flat output columns (rows x N), in pieces of up to p.bulk_cols
// columns within one output row. A piece is U weight rows per column (MODE
// 0: U = 2, gate and up of the row's expert; MODE 1: U = S slots, one
// expert each), copied unit by unit (a unit's columns are consecutive rows
// of one matrix, contiguous at ldb = K) into one stage, laid out
// [unit][column][K]. Each output row's A rows (MODE 0: its x row; MODE 1:
// one h row per slot) are bulk-copied once into one of two A buffers. The
// pair splits the piece's rows in halves and dots them four at a time, lane
// l taking 8-element chunks l, l + 32, ... (weights and A from shared
// memory), sums each row with shuffles, meets on a named barrier, and lanes
// c < columns of the even warp finish column c in a fixed order
// (deterministic), then release the stage.
//
// Measured on the H200 (session 20), DeepSeek-V3 T = 1: a CTA barrier per
// piece ran at half the register kernels' speed; one warp per stage with A
// read from L2 per piece, and then from shared memory, still 20-70% slower,
// the consumers the limit (6-7 warps per SM, 5.9 cycles per instruction).
// Two warps per stage and branch-free row groups (session 21): gate/up
// 112-117 us against the register kernel's 118-121 at DeepSeek-V3 and
// Mixtral T = 1 (ncu: 4.13 TB/s, 85.8% of DRAM peak), so the host picks it
// for gate/up with enough weights per SM (bulk_by_default in
// moe_grouped_gemm.cpp). The combine mode stays behind:
// DeepSeek-V3 T = 1 85-87 us against 64 (57.7% of DRAM peak, consumers
// waiting on full stages); neither 6 stages for 4, nor dealing pieces to
// the CTAs in turn, nor four consumer warps per stage changed that. With
// the dot products removed it still took 72 us: a copy takes ~7 us to land
// under this load, so the stages free for copies set the rate.
//
// The producer reads the schedule only: in MODE 1 with a settled schedule
// (p.prefetch != 0, see GroupedGemmParams) its first weights go out before
// the grid wait, so they stream while the previous kernel (gate/up) drains;
// the A rows, written by that kernel, after it.
#include "moe/grouped_gemv.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/mbarrier.cuh"

namespace tc::moe {

constexpr int kBulkMaxStages = 8;
constexpr int kBulkConsumers = 512;                 // warps 0-15: two per stage (those past the stages idle)
constexpr int kBulkThreads = kBulkConsumers + 32;   // + the producer warp
constexpr int kBulkMaxRows = 64;                    // weight rows per piece (units x columns), the host keeps it
constexpr int kBulkDynamicSmem = 224 * 1024;        // the most the host gives (A buffers + ring)
constexpr int kSm90SmemPerBlock = 227 * 1024;       // dynamic + static

template <typename T, typename OutT, int MODE, int TABLE>
struct GroupedGemvBulk {
  static_assert(sizeof(T) == 2, "16-bit inputs");
  static constexpr int kMaxUnits = MODE == 0 ? 2 : 32;

  struct Piece {
    int t;       // output row (MODE 0: the layout row); -1 ends the stream
    int n0;      // first column
    int cols;    // columns in this piece
    int rowseq;  // the CTA's how-manieth output row: its A rows are in A buffer rowseq % 2
  };
  // An output row's A rows in shared memory (MODE 0: the one x row; MODE 1:
  // one h row per slot), which units add anything, and their scales.
  struct ARows {
    unsigned long long full;  // completes when the rows have landed
    unsigned valid;           // bit u: unit u has an expert and an A row
    float scale[kMaxUnits];
  };
  struct Shared {
    unsigned long long full[kBulkMaxStages], empty[kBulkMaxStages];
    Piece piece[kBulkMaxStages];
    ARows arows[2];
    const T* w[kMaxUnits];  // the producer's current output row: weights per unit, null = nothing to copy
    float sum[kBulkMaxStages][kBulkMaxRows];  // per consumer warp: the piece's row dot products
  };

  static_assert(sizeof(Shared) + kBulkDynamicSmem <= kSm90SmemPerBlock, "the ring and the static part fit one SM");

  static __device__ __forceinline__ int units(const GroupedGemmParams& p) { return MODE == 0 ? 2 : p.combine; }
  static __device__ __forceinline__ int a_units(const GroupedGemmParams& p) { return MODE == 0 ? 1 : p.combine; }
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

  // Waits until the release of piece k's stage use, on that stage's empty
  // barrier. Only while that use is the stage's latest claimed one.
  static __device__ __forceinline__ void wait_released(Shared& sh, unsigned k, int S) {
    mbar_wait(&sh.empty[k % S], (k / S) & 1);
  }

  // One lane (warp 8's first). Streams the CTA's pieces into the ring and
  // each output row's A rows into A buffer rowseq % 2 (reloaded once every
  // piece of the row two back is released). The A rows may come from the
  // previous kernel: their copies wait for it (`waited`); with a settled
  // schedule the first weights go out before that wait, the first row's A
  // rows after them (at the latest when a stage must be reused).
  static __device__ __forceinline__ void produce(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, Shared& sh,
                                                 T* smem, bool waited) {
    const GroupedGemmParams& p = L.p;
    const int U = units(p), AU = a_units(p), S = p.bulk_stages;
    const long long a_elems = (long long)AU * p.K, stage_elems = (long long)p.bulk_cols * U * p.K;
    T* ring = smem + p.bulk_abufs * a_elems;
    const unsigned row_bytes = unsigned(p.K) * sizeof(T);
    int at, end;
    gemv_cta_range(out_rows(p) * p.N, at, end);
    const T** w = sh.w;  // (shared memory: a local array indexed at run time would take a stack frame)
    int cur = -1, rowseq = -1, pending = -1;  // pending: the row whose A copies are still to go out
    bool live = false;
    // Each A buffer's row's first and last piece (scalars: no stack frame).
    long long first_k0 = -1, last_k0 = -1, first_k1 = -1, last_k1 = -1;
    unsigned k = 0;
    auto issue_a = [&]() {
      if (!waited) grid_dependency_wait(), waited = true;
      const int b = pending & 1, t = cur;
      unsigned bytes = 0;
      for (int u = 0; u < AU; ++u) bytes += sh.arows[b].valid >> u & 1u ? row_bytes : 0u;
      mbar_arrive_expect_tx(&sh.arows[b].full, bytes);
      for (int u = 0; u < AU; ++u)
        if (sh.arows[b].valid >> u & 1u)
          bulk_load(smem + b * a_elems + (long long)u * p.K,
                    static_cast<const T*>(p.a) + (long long)gemv_a_row(p, layout_row(p, t, u)) * p.lda, row_bytes,
                    &sh.arows[b].full);
      pending = -1;
    };
    for (; at < end;) {
      const int t = at / p.N, n0 = at % p.N, cols = min(min(p.bulk_cols, p.N - n0), end - at);
      at += cols;
      if (t != cur) {
        if (pending >= 0) issue_a();
        cur = t;
        unsigned valid = 0;
        for (int u = 0; u < U; ++u) valid |= (w[u] = unit_weights(L, t, u)) != nullptr ? 1u << u : 0u;
        if constexpr (MODE == 0) valid = valid == 3u ? 1u : 0u;  // one A row, both matrices
        live = valid != 0;
        if (MODE == 0 && !live) continue;  // no expert: the row is skipped (nothing stored)
        const int b = ++rowseq & 1;
        // A buffer b last held row rowseq - 2: wait until every piece of it
        // is released. Pieces up to k - 1 - S are, by the stage claims so
        // far; each later one is its stage's latest claim, so its release is
        // the phase to wait for. (Warps finish out of order: the row's last
        // piece released says nothing of its others.)
        const long long first = b ? first_k1 : first_k0, last = b ? last_k1 : last_k0;
        for (long long j = max(first, (long long)k - S); first >= 0 && j <= last; ++j)
          wait_released(sh, unsigned(j), S);
        (b ? first_k1 : first_k0) = k;
        sh.arows[b].valid = valid;
        for (int u = 0; u < AU; ++u)
          sh.arows[b].scale[u] = p.row_scale ? p.row_scale[layout_row(p, t, u)] : 1.f;
        pending = rowseq;
      } else if (MODE == 0 && !live) {
        continue;
      }
      if (pending >= 0 && (waited || k >= unsigned(S))) issue_a();  // before a stage claim could wait on it
      const int s = k % S;
      if (k >= unsigned(S)) wait_released(sh, k - S, S);
      sh.piece[s] = Piece{t, n0, cols, rowseq};
      (rowseq & 1 ? last_k1 : last_k0) = k;
      const unsigned unit_bytes = unsigned(cols) * row_bytes;
      unsigned bytes = 0;
      for (int u = 0; u < U; ++u) bytes += w[u] ? unit_bytes : 0u;
      mbar_arrive_expect_tx(&sh.full[s], bytes);
      T* stage = ring + s * stage_elems;
      for (int u = 0; u < U; ++u)
        if (w[u]) bulk_load(stage + (long long)u * cols * p.K, w[u] + (long long)n0 * p.ldb, unit_bytes, &sh.full[s]);
      ++k;
    }
    if (pending >= 0) issue_a();
    for (int i = 0; i < S; ++i, ++k) {  // every consumer warp's end
      const int s = k % S;
      if (k >= unsigned(S)) wait_released(sh, k - S, S);
      sh.piece[s].t = -1;
      mbar_arrive(&sh.full[s]);
    }
  }

  // Dot products of NR consecutive piece rows (weights at w, w + K, ...)
  // with their A rows (MODE 0: one x row for all), lane l taking chunks l,
  // l + 32, ...: out[i] in every lane. No per-row branch inside the loop
  // (the caller keeps whole groups and discards rows it does not want).
  template <int NR>
  static __device__ __forceinline__ void dot_rows(const T* w, const T* const (&a)[NR], int K, int lane,
                                                  float (&out)[NR]) {
    float acc[NR][2];
#pragma unroll
    for (int i = 0; i < NR; ++i) acc[i][0] = acc[i][1] = 0.f;
#pragma unroll 2
    for (int q = lane; q < K / 8; q += 32) {
      float xf[8];
      if constexpr (MODE == 0) {
        const Vec<T, 8> xv = load_shared<T, 8>(a[0] + 8 * q);
#pragma unroll
        for (int j = 0; j < 8; ++j) xf[j] = to_float(xv.v[j]);
      }
#pragma unroll
      for (int i = 0; i < NR; ++i) {
        const Vec<T, 8> wv = load_shared<T, 8>(w + (long long)i * K + 8 * q);
        if constexpr (MODE == 1) {
          const Vec<T, 8> xv = load_shared<T, 8>(a[i] + 8 * q);
#pragma unroll
          for (int j = 0; j < 8; ++j) xf[j] = to_float(xv.v[j]);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j & 1] = fmaf(to_float(wv.v[j]), xf[j], acc[i][j & 1]);
      }
    }
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      out[i] = acc[i][0] + acc[i][1];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) out[i] += __shfl_xor_sync(0xffffffffu, out[i], off);
    }
  }

  // Rows [r0, r1) of a piece into sum[], NR at a time. Rows whose unit adds
  // nothing (not copied: their shared memory holds stale bytes) are
  // computed all the same and stored as 0.
  template <int NR>
  static __device__ __forceinline__ int dot_range(const GroupedGemmParams& p, const T* stage, const T* abuf,
                                                  unsigned valid, int cols, int r, int r1, float* sum, int lane) {
    for (; r + NR <= r1; r += NR) {
      const T* a[NR];
#pragma unroll
      for (int i = 0; i < NR; ++i) a[i] = abuf + (MODE == 0 ? 0 : (long long)((r + i) / cols) * p.K);
      float v[NR];
      dot_rows<NR>(stage + (long long)r * p.K, a, p.K, lane, v);
#pragma unroll
      for (int i = 0; i < NR; ++i)
        if (lane == 0) sum[r + i] = MODE == 0 || (valid >> ((r + i) / cols) & 1u) ? v[i] : 0.f;
    }
    return r;
  }

  // Consumer warp `warp` (< 2 p.bulk_stages): half warp % 2 of the rows of
  // every piece of stage warp / 2. The pair meets on named barrier 1 + stage
  // (64 threads) once per piece; then the even warp finishes the columns and
  // releases the stage.
  static __device__ __forceinline__ void consume(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, Shared& sh,
                                                 const T* smem, int warp) {
    const GroupedGemmParams& p = L.p;
    const int U = units(p), AU = a_units(p), lane = threadIdx.x % 32, st = warp / 2, half = warp % 2;
    const long long a_elems = (long long)AU * p.K;
    const T* stage = smem + p.bulk_abufs * a_elems + (long long)st * p.bulk_cols * U * p.K;
    float* sum = sh.sum[st];
    for (unsigned use = 0;; ++use) {
      mbar_wait(&sh.full[st], use & 1);
      const Piece pc = sh.piece[st];
      if (pc.t < 0) break;
      const int b = pc.rowseq & 1;
      mbar_wait(&sh.arows[b].full, (pc.rowseq >> 1) & 1);
      const ARows& ar = sh.arows[b];
      const T* abuf = smem + b * a_elems;
      // This warp's half of the piece's rows (unit r / cols, column r %
      // cols): four at a time, then one at a time.
      const int R = U * pc.cols, Rh = (R + 1) / 2, r1 = min(R, (half + 1) * Rh);
      int r = dot_range<4>(p, stage, abuf, ar.valid, pc.cols, half * Rh, r1, sum, lane);
      dot_range<1>(p, stage, abuf, ar.valid, pc.cols, r, r1, sum, lane);
      asm volatile("bar.sync %0, 64;\n" ::"r"(1 + st) : "memory");  // both halves' sums are written
      if (half != 0) continue;
      for (int c = lane; c < pc.cols; c += 32) {
        float v;
        if constexpr (MODE == 0) {
          v = gemm_silu(sum[c]) * sum[pc.cols + c];
          if (p.row_scale) v *= ar.scale[0];
        } else {
          v = 0.f;
          for (int u = 0; u < U; ++u)
            if (ar.valid >> u & 1u) v = fmaf(ar.scale[u], to_float(from_float<OutT>(sum[u * pc.cols + c])), v);
        }
        static_cast<OutT*>(p.c)[(long long)pc.t * p.ldc + pc.n0 + c] = from_float<OutT>(v);
      }
      // The stage, the sums and the row's A buffer and scales are read (the
      // odd warp passed the barrier after its last read): the release lets
      // the producer refill the stage, and after the row's pieces the A
      // buffer.
      __syncwarp();
      if (lane == 0) mbar_arrive(&sh.empty[st]);
    }
  }
};

// Trace slots (compile option `trace`): thread 0 at entry (0); the
// producer past its wait (1) and done issuing (2); consumer thread 0 past
// the dependency wait (3) and done (4).
template <typename T, typename OutT, int MODE, int TABLE>
__global__ void __launch_bounds__(kBulkThreads, 1) grouped_gemv_bulk_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  using G = GroupedGemvBulk<T, OutT, MODE, TABLE>;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  __shared__ typename G::Shared sh;
  trace_stamp(0);
  if (threadIdx.x == 0) {
    for (int s = 0; s < L.p.bulk_stages; ++s) mbar_init(&sh.full[s], 1), mbar_init(&sh.empty[s], 1);
    mbar_init(&sh.arows[0].full, 1), mbar_init(&sh.arows[1].full, 1);
    mbar_init_fence();
  }
  __syncthreads();
  T* smem = reinterpret_cast<T*>(smem_bytes);
  if (threadIdx.x >= kBulkConsumers) {
    if (threadIdx.x != kBulkConsumers) return;
    // The schedule and weights are ready before the wait where the schedule
    // was settled before the previous kernel began (MODE 1, p.prefetch != 0).
    const bool waited = MODE == 0 || L.p.prefetch == 0;
    if (waited) grid_dependency_wait();
    grid_dependency_launch_dependents();
    trace_stamp_here(1);
    G::produce(L, sh, smem, waited);
    trace_stamp_here(2);
    return;
  }
  grid_dependency_begin();
  trace_stamp(3);
  const int warp = threadIdx.x / 32;
  if (warp < 2 * L.p.bulk_stages) G::consume(L, sh, smem, warp);
  trace_stamp(4);
}

}  // namespace tc::moe
