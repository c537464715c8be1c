#pragma once
// decode_split = 2: the one-kernel decode path with the work split evenly
// over every SM, not by units. An option, not the default: it measured
// slower than decode_split = 1 at every model tried (H200, session 24:
// DeepSeek-V3 T = 1 experts 181-182 us against 173.3-173.5; ncu 181 against
// 168 us; docs/perf/fused_moe.md, "Session 24").
//
// Why it was tried: with one CTA per (slot, 128-column slice) unit,
// DeepSeek-V3 T = 1 has 128 units for 132 SMs, so 4 SMs stream nothing. No
// unit width fixes that (16384 columns over 132 CTAs needs granules of at
// most 2 columns).
//
// Every CTA (one per SM) takes two even ranges:
//   - phase A: columns [a0, a1) of the live slots' h laid end to end (live
//     slot ls owns columns ls I .. ls I + I - 1; ~124 per CTA at
//     DeepSeek-V3), in gate/up pieces that never cross a W-column unit;
//     their h values go to shared memory, and the warp of the CTA's last
//     phase-A piece copies them to h_global[a0 .. a1) (as T), fences once
//     and adds to each slot's published-column count;
//   - phase B: items [b0, b1) of the live slots' down rows laid end to end,
//     each `down_rows` full rows of one slot (one contiguous bulk copy: a
//     CTA streamed full rows at ~39 GB/s against ~29 for 256-byte-wide
//     boxes), waiting until its slot's count reaches I.
// The producer streams phase A then phase B without waiting for anything
// but its ring, so the ring holds phase-B rows while the slot completes.
// What it costs: every CTA waits for the slowest of the ~17 CTAs computing
// its slot's h (~10 us at DeepSeek-V3), more than the 4 SMs it gains.
//
// The one cross-CTA wait needs the CTAs it waits for resident: one CTA per
// SM (the ring's shared memory), the grid at most the SM count, so every
// CTA is resident at once (the assumption a cooperative launch makes).
// Within a CTA no cycle: its phase-A pieces precede its items in the ring.
// scripts/decode_split_protocol_model.py checks the protocol.
//
// Bits: h is decode_split = 1's; the down sums run over all of I per row
// (one partial per slot, the combine adds the slots), so the output is
// deterministic but not bitwise decode_split = 1's.
//
// Counters (ops/moe/launch_counters.h, all left at 0): sched[1] counts
// CTAs out, sched[2 + ls] live slot ls's published columns; the last CTA
// out clears them.
#include "moe/decode_split.cuh"

namespace tc::moe {

template <typename T, typename OutT, int W>
struct DecodeSplitBalanced {
  using D = DecodeSplit<T, OutT, W>;

  struct Piece {
    int kind;  // 0: gate/up columns [at, at + n) of unit `unit`, its first at phase-A column `col`;
               // 1: down rows [at, at + n) of unit `unit`, whose h starts at h_global[col]; -1: end
    int unit;  // global unit index (slot * slices + slice): the partial row
    int col, at, n;
  };
  struct Shared {
    unsigned long long full[kSplitMaxStages], empty[kSplitMaxStages];
    unsigned long long x_full;
    unsigned pieces_done;  // phase-A pieces consumed
    int live, a0, a1, b0, b1, pieces;  // this CTA's ranges and phase-A piece count
    // The live slots in order and their experts: the producer's per-piece
    // lookups stay in shared memory. (Walking ids in global memory for each
    // piece put up to eight dependent loads between a stage's release and
    // its refill: phase A took 103 us on the first CTAs and 154 on the
    // last, whose units are the furthest slots; H200, session 24.)
    int live_slot[kSplitMaxSlots], live_expert[kSplitMaxSlots];
    Piece piece[kSplitMaxStages];
    float sum[kSplitMaxStages][2 * D::kMaxGuCols];
    float h[kBalancedMaxCols];  // h of phase-A columns a0 .. a1
  };

  // Live unit q's global index and expert (slots outside [0, E) skipped).
  static __device__ __forceinline__ int unit_of(const DecodeSplitParams& p, const Shared& sh, int q) {
    return sh.live_slot[q / p.slices] * p.slices + q % p.slices;
  }
  static __device__ __forceinline__ int expert_of(const DecodeSplitParams& p, const Shared& sh, int q) {
    return sh.live_expert[q / p.slices];
  }

  // This CTA's ranges, and the number of pieces phase A cuts them into
  // (the producer's loop, counted). Thread 0, after the grid dependency.
  static __device__ __forceinline__ void setup(const DecodeSplitParams& p, Shared& sh) {
    int live = 0;
    for (int j = 0; j < p.S; ++j) {
      const int e = p.ids[j];
      if (e < 0 || e >= p.E) continue;
      sh.live_slot[live] = j, sh.live_expert[live] = e;
      ++live;
    }
    live *= p.slices;
    const long long cols = (long long)live * W;
    const long long boxes = (long long)(live / p.slices) * ((p.H + p.down_rows - 1) / p.down_rows);
    sh.live = live;
    sh.a0 = int(cols * blockIdx.x / gridDim.x), sh.a1 = int(cols * (blockIdx.x + 1) / gridDim.x);
    sh.b0 = int(boxes * blockIdx.x / gridDim.x), sh.b1 = int(boxes * (blockIdx.x + 1) / gridDim.x);
    int pieces = 0;
    for (int c = sh.a0; c < sh.a1; ++pieces) c += min(p.gu_cols, min(W - c % W, sh.a1 - c));
    sh.pieces = pieces;
    sh.pieces_done = 0;
  }

  // h as the activation type (the values the two-kernel path stores),
  // phase-A column order: live slot ls's h is [ls I, ls I + I).
  static __device__ __forceinline__ T* h_out(const DecodeSplitParams& p) { return reinterpret_cast<T*>(p.h_global); }

  // An item's n full rows (I columns each, contiguous in the stage) dotted
  // with the slot's h (global, through L1): the even warp of the pair the
  // first n / 2 rows, the odd one the rest; one fp32 sum per row into
  // out[r] (the slot's partial: the combine then adds the slots only).
  static __device__ __forceinline__ void down_rows(const T* stage, const T* h, float* out, int I, int n, int half,
                                                   int lane) {
    int r = half ? n / 2 : 0;
    const int end = half ? n : n / 2;
    for (; r + 4 <= end; r += 4) {
      float v[4];
      D::template dot_rows<4, true>(stage + (long long)r * I, h, I, lane, v);
      if (lane == 0)
        for (int j = 0; j < 4; ++j) out[r + j] = v[j];
    }
    for (; r < end; ++r) {
      float v[1];
      D::template dot_rows<1, true>(stage + (long long)r * I, h, I, lane, v);
      if (lane == 0) out[r] = v[0];
    }
  }

  // Per live slot, the columns of its h published so far (I when whole).
  static __device__ __forceinline__ unsigned* slot_cols(const DecodeSplitParams& p) { return p.sched + 2; }
  // After this CTA's h columns [a0, a1) are in h_global and fenced: lane i
  // adds to the i-th slot they meet the columns it got there.
  static __device__ __forceinline__ void publish(const DecodeSplitParams& p, const Shared& sh, int lane) {
    if (sh.a1 <= sh.a0) return;
    const int first = sh.a0 / p.I, last = (sh.a1 - 1) / p.I;
    for (int ls = first + lane; ls <= last; ls += 32) {
      const int lo = max(sh.a0, ls * p.I), hi = min(sh.a1, (ls + 1) * p.I);
      atomicAdd(slot_cols(p) + ls, unsigned(hi - lo));
    }
  }
  // Lane 0 waits until all of live slot ls's h is published (one acquire
  // that sees the count complete: this SM's L1 is invalidated, so later L1
  // loads of h see the published values), then the warp syncs. (A flag per
  // CTA, polled one after another, cost ~1 us per CTA: ~15 us at
  // DeepSeek-V3, whose slot is 17 CTAs' columns; H200, session 24.)
  static __device__ __forceinline__ void wait_slot(const DecodeSplitParams& p, int ls, int lane) {
    if (lane == 0)
      for (;;) {
        unsigned v;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(slot_cols(p) + ls) : "memory");
        if (v >= unsigned(p.I)) break;
        __nanosleep(64);
      }
    __syncwarp();
  }

  static __device__ __forceinline__ void produce(const DecodeSplitLaunch& L, Shared& sh, T* smem) {
    const DecodeSplitParams& p = L.p;
    const int S = p.stages, R = p.box_rows, N = p.down_rows, items = (p.H + N - 1) / N;
    T* ring = smem + D::ring_offset(p);
    const long long kStageElems = (long long)R * W;
    const unsigned row_bytes = unsigned(p.H) * sizeof(T);
    mbar_arrive_expect_tx(&sh.x_full, row_bytes);
    bulk_load(smem, p.x, row_bytes, &sh.x_full);
    SplitRing<T, Piece> ring_q{sh.full, sh.empty, sh.piece, ring, kStageElems, S};
    for (int c = sh.a0; c < sh.a1;) {
      const int q = c / W, in = c % W, n = min(p.gu_cols, min(W - in, sh.a1 - c));
      const int u = unit_of(p, sh, q), e = expert_of(p, sh, q);
      const long long first = (long long)e * p.gu_stride + ((long long)(u % p.slices) * W + in) * p.H;
      const unsigned bytes = unsigned(n) * row_bytes;
      const auto st = ring_q.claim(Piece{0, u, c, in, n}, 2 * bytes);
      bulk_load(st.data, static_cast<const T*>(p.w_gate) + first, bytes, st.full);
      bulk_load(st.data + (long long)n * p.H, static_cast<const T*>(p.w_up) + first, bytes, st.full);
      c += n;
    }
    for (int bx = sh.b0; bx < sh.b1; ++bx) {
      // Full rows [r, r + n) of live slot ls's down matrix: contiguous.
      const int ls = bx / items, r = (bx % items) * N, n = min(N, p.H - r);
      const int e = sh.live_expert[ls];
      const unsigned bytes = unsigned(n) * unsigned(p.I) * sizeof(T);
      const auto st = ring_q.claim(Piece{1, sh.live_slot[ls], ls, r, n}, bytes);
      bulk_load(st.data, static_cast<const T*>(p.w_down) + (long long)e * p.down_stride + (long long)r * p.I, bytes,
                st.full);
    }
    ring_q.finish();
    mbar_wait(&sh.x_full, 0);
  }

  static __device__ __forceinline__ void consume(const DecodeSplitLaunch& L, Shared& sh, const T* smem, int warp) {
    const DecodeSplitParams& p = L.p;
    const int lane = threadIdx.x % 32, st = warp / 2, half = warp % 2;
    const T* x = smem;
    const int R = p.box_rows;
    const T* stage = smem + D::ring_offset(p) + (long long)st * R * W;
    bool have_x = false;
    int ready_ls = -1;  // the live slot whose h this warp last waited for
    for (unsigned use = 0;; ++use) {
      mbar_wait(&sh.full[st], use & 1);
      const Piece pc = sh.piece[st];
      if (pc.kind < 0) break;
      if (pc.kind == 0) {
        if (!have_x) mbar_wait(&sh.x_full, 0), have_x = true;
        D::piece_sums(stage, x, pc.n, p.H, half, lane, sh.sum[st]);
        asm volatile("bar.sync %0, 64;\n" ::"r"(1 + st) : "memory");  // both matrices' sums are written
        if (half != 0) continue;
        for (int c = lane; c < pc.n; c += 32) {
          const float v = gemm_silu(sh.sum[st][c]) * sh.sum[st][D::kMaxGuCols + c];
          sh.h[pc.col - sh.a0 + c] = to_float(from_float<T>(v));  // as the two-kernel path stores h
        }
        __syncwarp();
        unsigned before = 0;
        if (lane == 0) before = D::count(&sh.pieces_done);
        if (__shfl_sync(0xffffffffu, before, 0) + 1 == unsigned(sh.pieces)) {
          // The CTA's last phase-A piece: every piece's h is in shared
          // memory. Copy them out, one device-wide fence, raise the flag.
          __threadfence_block();
          for (int c = lane; c < sh.a1 - sh.a0; c += 32) h_out(p)[sh.a0 + c] = from_float<T>(sh.h[c]);
          __threadfence();
          __syncwarp();
          publish(p, sh, lane);
        }
        if (lane == 0) mbar_arrive(&sh.empty[st]);
      } else {
        // Every CTA computing a column of the slot's h has published (a
        // warp's items are mostly of one slot: it waits once per slot).
        const int ls = pc.col;
        if (ls != ready_ls) wait_slot(p, ls, lane), ready_ls = ls;
        down_rows(stage, h_out(p) + (long long)ls * p.I, p.partial + (long long)pc.unit * p.H + pc.at, p.I, pc.n,
                  half, lane);
        asm volatile("bar.sync %0, 64;\n" ::"r"(1 + st) : "memory");  // both halves have read the stage
        if (half == 0 && lane == 0) mbar_arrive(&sh.empty[st]);
      }
    }
  }
};

template <typename T, typename OutT, int W>
__global__ void __launch_bounds__(kSplitThreads, 1)
    decode_split_balanced_kernel(const __grid_constant__ DecodeSplitLaunch L) {
  using B = DecodeSplitBalanced<T, OutT, W>;
  extern __shared__ __align__(1024) unsigned char smem_bytes[];
  __shared__ typename B::Shared sh;
  const DecodeSplitParams& p = L.p;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) mbar_init(&sh.full[s], 1), mbar_init(&sh.empty[s], 1);
    mbar_init(&sh.x_full, 1);
    mbar_init_fence();
  }
  T* smem = reinterpret_cast<T*>((reinterpret_cast<unsigned long long>(smem_bytes) + 1023) & ~1023ull);
  // ids come from the gate (the previous kernel); the ranges depend on them.
  grid_dependency_begin();
  if (threadIdx.x == 0) B::setup(p, sh);
  __syncthreads();
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == kSplitThreads - 32) B::produce(L, sh, smem);
  else if (warp < 2 * p.stages) B::consume(L, sh, smem, warp);
  // The last CTA out leaves the counters at 0 for the next launch (every
  // other CTA has counted itself out, so none still reads a flag).
  __shared__ bool last_out;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last_out = atomicAdd(p.sched + 1, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last_out) {
    for (int ls = threadIdx.x; ls < p.S; ls += blockDim.x) B::slot_cols(p)[ls] = 0;
    if (threadIdx.x == 0) p.sched[1] = 0;
  }
}

}  // namespace tc::moe
