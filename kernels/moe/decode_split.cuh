#pragma once
// fused_moe's decode path at T = 1 in one streaming kernel plus a small
// combine (decode_split; sm_90, stacked [N, K] weights, I a multiple of 8).
//
// Why: the two-kernel decode path (gate/up, then down + combine) waits for
// the whole gate/up grid before the down projection reads anything. Here
// the down projection is split along I: the CTA that computes a slice of W
// columns of one slot's h (W a template argument, chosen by the host) also
// multiplies it by the same columns of that slot's down weights, so no CTA
// waits for another; the combine kernel then adds the slices and the slots
// in a fixed order.
//
// Units: (slot j, slice s), u = j * slices + s; CTA b takes an even
// contiguous range of them. Per unit the producer (one lane of the last
// warp) streams into a ring of stages of box_rows x W x 2 bytes:
//   - gate/up pieces: gu_cols consecutive columns of the slice, their gate
//     rows then their up rows (two bulk copies), dotted with the token's x
//     (in shared memory, copied once);
//   - down boxes: rows r .. r + box_rows of the expert's [H, I] down
//     matrix, the slice's W columns (one tensor copy; rows past H are
//     zeros).
// Warps 2s and 2s + 1 consume stage s. A gate/up piece: the even warp dots
// the gate rows, the odd one the up rows; then h = silu(gate) * up, rounded
// to the activation type as the stored h of the two-kernel path is, goes to
// the unit's h buffer (two, by the unit's parity within the CTA), and the
// piece counts itself in h_ready[parity]. A down box waits for h_ready (all
// the unit's pieces), takes its rows W / 8 lanes per row (the rows of a
// step are contiguous: no bank conflicts), writes one fp32 partial per row
// to partial[u][row], and counts itself in h_free[parity], which lets the
// gate/up pieces of the CTA's unit two further on refill the buffer. The
// producer issues a unit's pieces before its boxes, so whatever a consumer
// waits on is already in a stage: no cycle. The weight copies carry an
// evict-first L2 policy: 705 MB stream through the L2 at DeepSeek-V3 T = 1,
// and without it they evicted the partials (3.7 MB) before the combine read
// them (H200: experts 170.9-171.2 -> 169.8-170.0 us, layer 170.2-170.5 ->
// 167.0-167.8).
//
// h_ready and h_free are monotonic counters in shared memory, not
// mbarriers: a down box may reach its stage while its buffer's previous
// unit's pieces are still unconsumed, and a parity wait on an mbarrier two
// phases behind passes at once (a fresh barrier counts as having completed
// the phase of parity 1). scripts/decode_split_protocol_model.py found it.
//
// With a balancing pool (pool_boxes > 0; by default an eighth of a unit's
// boxes, chosen in decode_split.cpp) the last pool_boxes boxes of every
// unit are not the owner's: the warp of a unit's last gate/up piece copies
// the unit's h to h_global,
// fences once and publishes the unit (sched[0]'s high bits; one more
// h_free count, so the buffer is not refilled under the copy); a producer
// past its own boxes and its own units' publication claims pool boxes
// (sched[0]'s low bits) only if every live unit is published, so no CTA
// waits for another, and the CTA whose unit is published last empties the
// pool. A pool box reads h from h_global: the same values, the same bits.
//
// The combine (decode_split_combine_kernel): out[n] = sum over slots j in
// order of scale_j * round_out(sum over slices s in order of
// partial[j, s][n]), rounded: the two-kernel path's rounding, another fp32
// order (deterministic, not the same bits).
#include "moe/decode_split_params.cuh"
#include "moe/grouped_gemv.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/mbarrier.cuh"
#include "tile/trace.cuh"

namespace tc::moe {

// The producer's side of a decode-split ring (both kernels): piece k takes
// stage k % S once that stage's previous use is released; finish() hands
// every consumer pair its end marker (kind -1).
template <typename T, typename Piece>
struct SplitRing {
  unsigned long long* full;
  unsigned long long* empty;
  Piece* piece;
  T* ring;
  long long stage_elems;
  int S;
  unsigned k = 0;
  struct Stage {
    T* data;
    unsigned long long* full;  // the barrier its copies complete on
  };
  __device__ __forceinline__ Stage claim(const Piece& pc, unsigned bytes) {
    const int s = k % S;
    if (k >= unsigned(S)) mbar_wait(&empty[s], ((k - S) / S) & 1);
    piece[s] = pc;
    mbar_arrive_expect_tx(&full[s], bytes);
    ++k;
    return {ring + s * stage_elems, &full[s]};
  }
  __device__ __forceinline__ void finish() {
    for (int i = 0; i < S; ++i, ++k) {
      const int s = k % S;
      if (k >= unsigned(S)) mbar_wait(&empty[s], ((k - S) / S) & 1);
      piece[s].kind = -1;
      mbar_arrive(&full[s]);
    }
  }
};

template <typename T, typename OutT, int W>
struct DecodeSplit {
  static_assert(W % 8 == 0 && W >= 8 && W <= kSplitMaxCols, "W: a multiple of 8 up to kSplitMaxCols");
  // Down boxes: kLanes lanes per row (a power of two, at least W / 8): lane
  // l of a row takes its columns 8 l .. 8 l + 7 (lanes past W / 8 add
  // zeros), so a warp reads kStep rows per step. A compile-time width keeps
  // the row loop unrolled and its loads batched: with W at run time the
  // kernel took 208 us at DeepSeek-V3 T = 1 against 170 (H200, session 23).
  static constexpr int kLanes = W > 64 ? 16 : W > 32 ? 8 : W > 16 ? 4 : W > 8 ? 2 : 1;
  static constexpr int kStep = 32 / kLanes;
  static constexpr bool kLive = 8 * kLanes == W;  // every lane of a row has columns
  static_assert(sizeof(T) == 2, "16-bit inputs");
  static constexpr int kMaxGuCols = 64;

  struct Piece {
    int kind;   // 0: gate/up columns [at, at + n) of the slice; 1: down rows [at, at + n) of an own
                // unit (h in shared memory); 2: of a pool box (h from h_global); -1: end
    int lunit;  // the unit's index within this CTA (its h buffer: lunit % 2)
    int unit;   // its global index (partial row)
    int at, n;
  };
  struct Shared {
    unsigned long long full[kSplitMaxStages], empty[kSplitMaxStages];
    unsigned long long x_full;
    unsigned h_ready[2], h_free[2];  // counts: gate/up pieces written to h[b], down boxes done reading it
    unsigned published;              // this CTA's units whose h is published (pool_boxes > 0)
    Piece piece[kSplitMaxStages];
    float sum[kSplitMaxStages][2 * kMaxGuCols];  // a gate/up piece's row sums
    float h[2][kSplitMaxCols];                  // a unit's h slice, by parity
  };

  // The ring starts past x, 1 KB aligned (tensor copies need 128 bytes).
  static __device__ __forceinline__ long long ring_offset(const DecodeSplitParams& p) {
    return ((long long)p.H * sizeof(T) + 1023) / 1024 * 1024 / sizeof(T);
  }

  // Spins until the counter reaches `target`, then orders what its
  // increments released before this warp's reads (one lane waits).
  static __device__ __forceinline__ void wait_count(const unsigned* counter, unsigned target, int lane) {
    if (lane == 0)
      while (*static_cast<const volatile unsigned*>(counter) < target) __nanosleep(32);
    __syncwarp();
    __threadfence_block();
  }
  // Adds one to the counter after this warp's writes (lane 0; the caller
  // has synced the warp); returns the count before.
  static __device__ __forceinline__ unsigned count(unsigned* counter) {
    __threadfence_block();
    return atomicAdd(counter, 1u);
  }

  // The unit of the q-th live (slot, slice) pair, slots with an expert
  // outside [0, E) skipped; -1 past the last.
  static __device__ __forceinline__ int live_unit(const DecodeSplitParams& p, int q) {
    int want = q / p.slices;
    for (int j = 0; j < p.S; ++j) {
      const int e = p.ids[j];
      if (e < 0 || e >= p.E) continue;
      if (want-- == 0) return j * p.slices + q % p.slices;
    }
    return -1;
  }

  static __device__ __forceinline__ void units_of_cta(const DecodeSplitParams& p, int& u0, int& u1) {
    const long long units = (long long)p.S * p.slices;
    u0 = int(units * blockIdx.x / gridDim.x);
    u1 = int(units * (blockIdx.x + 1) / gridDim.x);
  }

  static __device__ __forceinline__ void produce(const DecodeSplitLaunch& L, Shared& sh, T* smem) {
    const DecodeSplitParams& p = L.p;
    const int S = p.stages;
    T* ring = smem + ring_offset(p);
    const int R = p.box_rows;
    const long long kStageElems = (long long)R * W;
    const unsigned row_bytes = unsigned(p.H) * sizeof(T);
    trace_stamp_here(2);
    mbar_arrive_expect_tx(&sh.x_full, row_bytes);
    bulk_load(smem, p.x, row_bytes, &sh.x_full);
    SplitRing<T, Piece> ring_q{sh.full, sh.empty, sh.piece, ring, kStageElems, S};
    // The weights are read once: evict-first, so that the partials written
    // meanwhile stay in L2 for the combine.
    const unsigned long long once = l2_evict_first_policy();
    const int boxes = (p.H + R - 1) / R, own_boxes = boxes - p.pool_boxes;
    int u0, u1, lu = 0;
    units_of_cta(p, u0, u1);
    for (int u = u0; u < u1; ++u) {
      const int slot = u / p.slices, slice = u % p.slices, e = p.ids[slot];
      if (e < 0 || e >= p.E) continue;  // adds nothing: no pieces, no partials (the combine skips the slot)
      const long long first = (long long)e * p.gu_stride + (long long)slice * W * p.H;
      const T* gate = static_cast<const T*>(p.w_gate) + first;
      const T* up = static_cast<const T*>(p.w_up) + first;
      for (int c = 0; c < W; c += p.gu_cols) {
        const int n = min(p.gu_cols, W - c);
        const unsigned bytes = unsigned(n) * row_bytes;
        const auto st = ring_q.claim(Piece{0, lu, u, c, n}, 2 * bytes);
        bulk_load(st.data, gate + (long long)c * p.H, bytes, st.full, once);
        bulk_load(st.data + (long long)n * p.H, up + (long long)c * p.H, bytes, st.full, once);
      }
      for (int r = 0; r < own_boxes * R; r += R) {
        // The whole box's bytes count, rows past H included (zeros).
        const auto st = ring_q.claim(Piece{1, lu, u, r, min(R, p.H - r)}, unsigned(R * W * sizeof(T)));
        tma_load_3d(st.data, &L.down, slice * W, r, e, st.full, once);
        if (lu == 0 && r == 0) trace_stamp_here(3);
      }
      ++lu;
    }
    trace_stamp_here(4);
    if (p.pool_boxes > 0) {
      // Each unit is published (sched[0]'s high bits) by the consumer of
      // its last gate/up piece, long before this point; wait for this
      // CTA's own, then take from the pool only if every live unit is
      // published: no CTA waits for another. The CTA whose unit is
      // published last always sees them all, so the pool is always emptied.
      while (*static_cast<volatile unsigned*>(&sh.published) < unsigned(lu)) __nanosleep(64);
      __threadfence();
      int live = 0;
      for (int j = 0; j < p.S; ++j) live += p.ids[j] >= 0 && p.ids[j] < p.E;
      live *= p.slices;
      if (int(atomicAdd(p.sched, 0u) >> 16) == live) {
        __threadfence();
        const unsigned items = unsigned(live) * unsigned(p.pool_boxes);
        for (;;) {
          const unsigned v = atomicAdd(p.sched, 1u) & 0xffffu;
          if (v >= items) break;
          const int u = live_unit(p, int(v % unsigned(live))), r = (own_boxes + int(v / unsigned(live))) * R;
          const int slot = u / p.slices, slice = u % p.slices;
          const auto st = ring_q.claim(Piece{2, 0, u, r, min(R, p.H - r)}, unsigned(R * W * sizeof(T)));
          tma_load_3d(st.data, &L.down, slice * W, r, p.ids[slot], st.full, once);
        }
      }
    }
    ring_q.finish();
    trace_stamp_here(5);
    // x's copy has landed before the CTA can exit (a CTA with no live unit
    // has no consumer that waits for it).
    mbar_wait(&sh.x_full, 0);
  }

  // Dot products of rows w, w + H, ... (NR of them, in shared memory) with
  // x (shared, or with kGlobalX global through L1), lane l taking 8-element
  // chunks l, l + 32, ...: out[i] in every lane.
  template <int NR, bool kGlobalX = false>
  static __device__ __forceinline__ void dot_rows(const T* w, const T* x, int H, int lane, float (&out)[NR]) {
    float acc[NR];
#pragma unroll
    for (int i = 0; i < NR; ++i) acc[i] = 0.f;
#pragma unroll 2
    for (int q = lane; q < H / 8; q += 32) {
      const Vec<T, 8> xv = kGlobalX ? load_global_l1<T, 8>(x + 8 * q) : load_shared<T, 8>(x + 8 * q);
      float xf[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) xf[j] = to_float(xv.v[j]);
#pragma unroll
      for (int i = 0; i < NR; ++i) {
        const Vec<T, 8> wv = load_shared<T, 8>(w + (long long)i * H + 8 * q);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i] = fmaf(to_float(wv.v[j]), xf[j], acc[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      out[i] = acc[i];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) out[i] += __shfl_xor_sync(0xffffffffu, out[i], off);
    }
  }

  // A gate/up piece's row sums: this warp's matrix (the even warp of the
  // pair the gate rows, the odd one the up rows) dotted with x, into
  // sum[half * kMaxGuCols + i] (lane 0 writes).
  static __device__ __forceinline__ void piece_sums(const T* stage, const T* x, int n, int H, int half, int lane,
                                                    float* sum) {
    const T* rows = stage + (long long)half * n * H;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
      float v[4];
      dot_rows<4>(rows + (long long)i * H, x, H, lane, v);
      if (lane == 0)
        for (int j = 0; j < 4; ++j) sum[half * kMaxGuCols + i + j] = v[j];
    }
    for (; i < n; ++i) {
      float v[1];
      dot_rows<1>(rows + (long long)i * H, x, H, lane, v);
      if (lane == 0) sum[half * kMaxGuCols + i] = v[0];
    }
  }

  // One down box: this warp's half of its R rows (n of them real) dotted
  // with h (hv: lane l's columns 8 l .. 8 l + 7), one fp32 partial per row
  // into out[r]. kStep rows per step: a uniform loop (R is a multiple of 8,
  // so with kStep <= 4 every step is inside the half; wider steps check).
  // Rows past the matrix are zeros in the stage and are not stored.
  static __device__ __forceinline__ void down_box(const T* stage, const float (&hv)[8], float* out, int R, int n,
                                                  int half, int lane) {
    const int l = lane % kLanes, sub = lane / kLanes;
    const bool live = kLive || 8 * l < W;
    const int end = half ? R : R / 2;
#pragma unroll 4
    for (int r0 = half * (R / 2); r0 < end; r0 += kStep) {
      const int r = r0 + sub;
      const bool row = kStep <= 4 || r < end;
      float acc = 0.f;
      if (row && live) {
        const Vec<T, 8> wv = load_shared<T, 8>(stage + (long long)r * W + 8 * l);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc = fmaf(to_float(wv.v[j]), hv[j], acc);
      }
#pragma unroll
      for (int off = kLanes / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (l == 0 && row && r < n) out[r] = acc;
    }
  }

  // Lane l's h values for a down box: columns 8 l .. 8 l + 7 of `h` (shared
  // or, with `global`, read past L1 from another CTA's published slice).
  static __device__ __forceinline__ void h_lanes(const float* h, bool global, int lane, float (&hv)[8]) {
    const int l = lane % kLanes;
    const bool live = kLive || 8 * l < W;
#pragma unroll
    for (int j = 0; j < 8; ++j) hv[j] = !live ? 0.f : global ? __ldcg(h + 8 * l + j) : h[8 * l + j];
  }

  static __device__ __forceinline__ void consume(const DecodeSplitLaunch& L, Shared& sh, const T* smem, int warp) {
    const DecodeSplitParams& p = L.p;
    const int lane = threadIdx.x % 32, st = warp / 2, half = warp % 2;
    const T* x = smem;
    const int R = p.box_rows;
    const T* stage = smem + ring_offset(p) + (long long)st * R * W;
    bool have_x = false, first_box = true;
    const bool tracer = warp == 0 && lane == 0;
    for (unsigned use = 0;; ++use) {
      mbar_wait(&sh.full[st], use & 1);
      if (tracer && use == 0) trace_stamp_here(6);
      const Piece pc = sh.piece[st];
      if (pc.kind < 0) break;
      const int b = pc.lunit & 1;
      if (pc.kind == 0) {
        if (!have_x) mbar_wait(&sh.x_full, 0), have_x = true;
        // The h buffer's previous unit (two back) has had all its own boxes
        // read (and, with a pool, its copy to h_global made: one more count).
        const unsigned readers = unsigned((p.H + R - 1) / R - p.pool_boxes) + (p.pool_boxes > 0);
        if (pc.lunit >= 2) wait_count(&sh.h_free[b], unsigned(pc.lunit >> 1) * readers, lane);
        piece_sums(stage, x, pc.n, p.H, half, lane, sh.sum[st]);
        asm volatile("bar.sync %0, 64;\n" ::"r"(1 + st) : "memory");  // both matrices' sums are written
        if (half != 0) continue;
        for (int c = lane; c < pc.n; c += 32) {
          const float v = gemm_silu(sh.sum[st][c]) * sh.sum[st][kMaxGuCols + c];
          const float h = to_float(from_float<T>(v));  // as the two-kernel path stores h
          sh.h[b][pc.at + c] = h;
        }
        __syncwarp();
        unsigned before = 0;
        if (lane == 0) before = count(&sh.h_ready[b]);
        const unsigned pieces = unsigned(W + p.gu_cols - 1) / p.gu_cols;
        if (p.pool_boxes > 0 &&
            __shfl_sync(0xffffffffu, before, 0) + 1 == unsigned((pc.lunit >> 1) + 1) * pieces) {
          // The unit's last piece: its whole h slice is in shared memory
          // (every piece's warp wrote before counting). One warp copies it
          // out and publishes the unit, one device-wide fence per unit (a
          // fence per piece cost ~14 us at DeepSeek-V3 T = 1).
          __threadfence_block();
          for (int c = lane; c < W; c += 32) p.h_global[(long long)pc.unit * W + c] = sh.h[b][c];
          __threadfence();
          __syncwarp();
          if (lane == 0) {
            atomicAdd(p.sched, 1u << 16);
            __threadfence();
            atomicAdd(&sh.published, 1u);
            count(&sh.h_free[b]);  // the buffer may be refilled
          }
        }
        if (lane == 0) mbar_arrive(&sh.empty[st]);
      } else {
        float hv[8];
        if (pc.kind == 1) {
          // Every piece of this unit has written h (each earlier unit of the
          // buffer counted its pieces too).
          const unsigned pieces = unsigned(W + p.gu_cols - 1) / p.gu_cols;
          wait_count(&sh.h_ready[b], unsigned((pc.lunit >> 1) + 1) * pieces, lane);
          if (tracer && first_box) trace_stamp_here(7), first_box = false;
          h_lanes(sh.h[b], false, lane, hv);
        } else {
          // A pool box: its unit was published before the producer claimed
          // it (the same values its owner holds, so the same bits).
          h_lanes(p.h_global + (long long)pc.unit * W, true, lane, hv);
        }
        down_box(stage, hv, p.partial + (long long)pc.unit * p.H + pc.at, R, pc.n, half, lane);
        asm volatile("bar.sync %0, 64;\n" ::"r"(1 + st) : "memory");  // both halves have read h and the stage
        if (half == 0 && lane == 0) {
          if (pc.kind == 1) count(&sh.h_free[b]);
          mbar_arrive(&sh.empty[st]);
        }
      }
    }
    if (tracer) trace_stamp_here(8);
  }
};

// Trace slots (compile option `trace`): thread 0 at entry (0) and past the
// dependency wait (1); the producer starting (2), its first down box issued
// (3), every own copy issued (4), its end markers issued (5); consumer warp
// 0 past its first stage wait (6), at its first down box (7), done (8).
template <typename T, typename OutT, int W>
__global__ void __launch_bounds__(kSplitThreads, 1) decode_split_kernel(const __grid_constant__ DecodeSplitLaunch L) {
  using D = DecodeSplit<T, OutT, W>;
  extern __shared__ __align__(1024) unsigned char smem_bytes[];
  __shared__ typename D::Shared sh;
  const DecodeSplitParams& p = L.p;
  trace_stamp(0);
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) mbar_init(&sh.full[s], 1), mbar_init(&sh.empty[s], 1);
    mbar_init(&sh.x_full, 1);
    sh.h_ready[0] = sh.h_ready[1] = sh.h_free[0] = sh.h_free[1] = sh.published = 0;
    mbar_init_fence();
  }
  __syncthreads();
  // (The host adds 1 KB: the ring's tensor copies need aligned stages.)
  T* smem = reinterpret_cast<T*>((reinterpret_cast<unsigned long long>(smem_bytes) + 1023) & ~1023ull);
  // ids come from the gate (the previous kernel); partials and out are
  // written here and read by the combine after it.
  grid_dependency_begin();
  trace_stamp(1);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == kSplitThreads - 32) D::produce(L, sh, smem);
  else if (warp < 2 * p.stages) D::consume(L, sh, smem, warp);
  if (p.pool_boxes > 0) {
    // The last CTA out leaves the counter pair at 0 for the next launch
    // (every CTA is past its last use of it).
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(p.sched + 1, 1u) == gridDim.x - 1) {
        atomicExch(p.sched, 0u);
        atomicExch(p.sched + 1, 0u);
      }
    }
  }
}

// out[n] for n < H. A CTA takes kCombineCols columns; its warp g sums the
// slices of slots g, g + 8, ... (slice order fixed, loads independent: the
// combine is latency-bound, and one thread per column walking every
// partial row in turn took 14 us at DeepSeek-V3 T = 1), leaves each slot's
// rounded sum in shared memory, and warp 0 chains the slots in order.
template <typename T, typename OutT>
__global__ void __launch_bounds__(kCombineThreads) decode_split_combine_kernel(const DecodeSplitParams p) {
  extern __shared__ float slot_sum[];  // [S][kCombineCols]
  grid_dependency_begin();
  const int c = threadIdx.x % kCombineCols, g = threadIdx.x / kCombineCols;
  const int n = blockIdx.x * kCombineCols + c;
  if (n < p.H) {
    for (int j = g; j < p.S; j += kCombineThreads / kCombineCols) {
      const int e = p.ids[j];
      float y = 0.f;
      if (e >= 0 && e < p.E) {
        const float* row = p.partial + (long long)j * p.slices * p.H + n;
#pragma unroll 8
        for (int s = 0; s < p.slices; ++s) y += row[(long long)s * p.H];
        y = to_float(from_float<OutT>(y));
      }
      slot_sum[j * kCombineCols + c] = y;
    }
  }
  __syncthreads();
  if (g != 0 || n >= p.H) return;
  float o = 0.f;
  for (int j = 0; j < p.S; ++j) {
    const int e = p.ids[j];
    if (e < 0 || e >= p.E) continue;
    o = fmaf(p.scale ? p.scale[j] : 1.f, slot_sum[j * kCombineCols + c], o);
  }
  static_cast<OutT*>(p.out)[n] = from_float<OutT>(o);
}

}  // namespace tc::moe
