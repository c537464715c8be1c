#pragma once
// moe_grouped_gemm, Hopper warp-specialised path (sm_90a, opt-in: sm90=2).
// The same tiles, shared-memory layout, wgmma issue and epilogue as
// grouped_gemm_sm90.cuh, with the roles split: warpgroup 0 only loads
// (cp.async, A rows gathered through a_index), warpgroups 1 and 2 only
// multiply. Stages hand over through mbarriers instead of a block-wide
// barrier per k-step:
//   full[s]  - 128 arrivals, made by the hardware (cp.async.mbarrier.arrive
//              .noinc) once each producer thread's copies of stage s landed,
//              so the producer never waits for its own loads and keeps up to
//              STAGES stages in flight; a consumer fences for the async proxy
//              after its wait, before wgmma reads the slot (not where A too
//              comes by TMA: every write into a stage is then a tensor copy);
//   empty[s] - 8 arrivals: each consumer warp's wgmma that read slot s
//              retired (lane 0, after wgmma.wait_group 1 of the next k-step).
// With TMA (weights by tensor map, A still gathered by cp.async): thread 0
// also arrives with expect_tx of the stage's weight bytes and issues the
// tensor copies, which complete on the same full barrier (129 arrivals). The
// tensor copies write the 128-byte swizzle themselves, into the layouts
// above, zero-filling past N and K; the producer's 128 threads then copy A
// only (8 chunks each per 128-row stage instead of 24). With TMA_A (A rows
// in layout order, no a_index) A comes by tensor copy too: thread 0 alone
// feeds the ring and the full barrier counts its one arrival.
// Use u of slot s (k-step t = s + u * STAGES) completes phase u of each
// barrier, so waits use parity u & 1; neither side runs a whole ring ahead.
// The producer fills up to STAGES slots ahead (the cp.async kernel keeps
// STAGES - 2 in flight) and the consumers never wait for address arithmetic.
// No deadlock: the producer waits only for the release of k-step t - STAGES,
// which the consumers give once stage t - STAGES + 1 (issued earlier, and
// published by the hardware when it lands) is in.
//
// CLUSTER = 2 (TMA weights only): CTAs 2c and 2c + 1 form a cluster that
// takes tile pairs (2u, 2u + 1), CTA rank r tile 2u + r. With p.multicast,
// where both tiles read the same weights (same expert, same columns: adjacent
// row tiles in the grouped order) each weight box is loaded once, by rank
// (box index % 2), and multicast into both CTAs' slots; every full barrier
// still expects the stage's whole weight bytes. (On the H200 that measured
// slower than each CTA loading its own boxes: multicast is off by default.)
// Because a peer may write into this CTA's ring (and so that the two CTAs
// stay in lockstep), a slot is refilled only when both CTAs' consumers
// released it: the empty barriers count 16 arrivals, and each consumer warp
// arrives on its own and on the peer's, on every k-step of every pair,
// multicast or not. So both
// ranks run the same k-steps: a rank whose tile is empty (past the end, or of
// no expert) while its peer's is not runs the pair's k-steps without loads,
// MMAs or stores. Rank 0's producer takes the pair from the tile counter and
// publishes it in both CTAs' tile rings (remote store and arrival); its
// tempty counts both CTAs' readers (8 + 8 consumer warps + rank 1's
// producer). A cluster barrier after the setup and before the exit keeps
// every remote access inside both CTAs' lifetimes.
#include "moe/grouped_gemm_sm90.cuh"
#include "moe/grouped_gemm_combine.cuh"
#include "tile/cluster.cuh"
#include "tile/mbarrier.cuh"
#include "tile/trace.cuh"

namespace tc::moe {

// Arrives on `bar` when all of this thread's earlier cp.async have landed;
// the arrival is counted in the barrier's expected count (noinc).
__device__ __forceinline__ void mbar_arrive_on_cp_async(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// The same box into the same shared-memory offset of every CTA in `mask`
// (cluster ranks), completing `bytes` on each one's barrier at that offset.
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const TmaDesc* map, int c0, int c1, int c2,
                                                      unsigned long long* bar, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar)), "h"(mask)
      : "memory");
}
// Tensor store of one box from shared memory (bulk async-group of this thread).
__device__ __forceinline__ void tma_store_3d(const TmaDesc* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk stores, all but the newest N groups, have read their
// shared memory (it may be rewritten).
template <int N = 0>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// ... and have completed.
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Named barrier `bar` over 128 threads (a warpgroup) that also returns
// whether `v` held in all of them.
__device__ __forceinline__ bool bar_red_and(int bar, bool v) {
  unsigned r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 q, %1, 0;\n bar.red.and.pred p, %2, 128, q;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(r)
      : "r"(unsigned(v)), "r"(bar)
      : "memory");
  return r != 0;
}

template <typename T, typename OutT, int BM, int BN, int STAGES, int LAYOUT, bool DUAL, int TABLE, bool TMA,
          bool TMA_A, bool TMA_C, int CLUSTER, int STAGGER = 0, bool LEAN_A = false, bool LEAN_DESC = false,
          bool FILL = false>
struct GroupedGemmSm90Ws {
  static_assert(TMA || !TMA_A, "A by TMA only with the weights by TMA");
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && TMA), "CTA pairs share weights by TMA multicast only");
  static constexpr bool kPair = CLUSTER == 2;
  // Weight maps in global memory (more experts by pointer than the
  // parameters hold): see acquire_maps.
  static constexpr bool kGlobalMaps = TMA && TABLE > kParamMaps;
  // STAGGER > 0: consumer warpgroup 1 starts once warpgroup 0 has issued its
  // first STAGGER k-steps, and the lag persists (both then share the tensor
  // pipe at one rate), so each one's epilogue runs under the other's MMAs.
  // The ring's look-ahead for warpgroup 0 shrinks by the lag.
  static_assert(STAGGER == 0 || (CLUSTER == 1 && STAGGER < STAGES), "a lag within the ring, one CTA per tile");
  // LEAN_A: the producer's gathered A rows as pointers made once per tile
  // (rows that are not real point at row 0), so a whole k-step costs each
  // chunk a 64-bit add, a predicate and its copy; only a K tail takes the
  // checked path. Without it each chunk re-derives its address from the
  // row offset and the base (about 12 instructions per chunk, session 34's
  // SASS), and the producer issues twice the consumers' instructions.
  static_assert(!LEAN_A || !TMA_A, "LEAN_A is the cp.async gather of A");
  // LEAN_DESC: the consumers make their MMA descriptors of stage 0 once,
  // broadcast (uniform), and each k-step's by adds
  // (Base::compute_stage_from). Without it each k-step rebuilds them from
  // the ring's address, which the compiler re-derives from the CTA's
  // cluster id and the shared window every k-step (session 34's SASS: ~60
  // instructions per consumer warp per k-step around its 4 MMAs).
  // FILL (tensor stores, p.store_fill given): rows marked padding are not
  // stored. A warpgroup's 64-row block goes out by tensor stores only when
  // every row of it is real; otherwise its consumers store the real rows
  // from the staging themselves. Each consumer thread loads its row's mark
  // when the tile starts (the load's latency under the mainloop) and the
  // warpgroup ANDs them at the epilogue (bar.red). Padding rows are never
  // read downstream (the combine reads real rows; a padding row of A only
  // reaches the same padding row of C), yet at 16 rows per 64-row tile they
  // were 3/4 of every tile's stores: DRAM writes beside a read-bound stream.
  static_assert(!FILL || TMA_C, "FILL is the tensor-store epilogue's");
  // The fused combine needs the producer's idle warps (A by TMA, one thread
  // issues every copy), tensor stores (their completion is what a row tile
  // publishes) and one CTA per cluster; the host passes comb_sync only then.
  static constexpr bool kCombineOk = TMA_A && TMA_C && CLUSTER == 1 && sizeof(OutT) == 2;
  using Comb = GemmCombine<OutT, BM, BN>;
  // Register split (multiples of 8): 56 / 224, or where the combine may run
  // in the producer's warps 72 / 216 (its loads in flight spilled at 56).
  // With cp.async weights (no TMA) the producer's 128 threads compute every
  // copy's address: at 56 they spilled 12-156 bytes (ptxas, sm_90a), so
  // 72 / 216 for a gated pair (its consumers spill at 208) and 88 / 208 for
  // a plain projection (its producer still spilled at 72). With the weight
  // maps in global memory the gated pairs' producer spilled 16 bytes at 56
  // (the map pointers and the expert last acquired): 72 / 216 there.
  static constexpr bool kLeanProducer = TMA && !(kGlobalMaps && kPair);
  static constexpr int kProducerRegs = kCombineOk ? 72 : kLeanProducer ? 56 : TMA || DUAL ? 72 : 88;
  static constexpr int kConsumerRegs = kCombineOk ? 216 : kLeanProducer ? 224 : TMA || DUAL ? 216 : 208;
  static_assert(128 * (168 - kProducerRegs) == 256 * (kConsumerRegs - 168), "the register split must balance");
  static_assert(TMA || !TMA_C, "stores by TMA only with the weights by TMA (the launch that carries maps)");
  using Base = GroupedGemmSm90<T, OutT, BM, BN, STAGES, LAYOUT, DUAL, TABLE>;
  using Launch = typename GroupedGemmLaunchOf<TMA, TABLE ? TABLE : 1>::type;
  static constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
  static constexpr int kB = Base::kB, kAcc = Base::kAcc, kABytes = Base::kABytes, kBBytes = Base::kBBytes;
  static constexpr int kStageBytes = Base::kStageBytes;
  // Ring, the consumers' epilogue staging (kGemmWsStagingBytes), A-row
  // sources, 2 * STAGES stage mbarriers, 4 tile-ring mbarriers and 2 tile
  // indices; + alignment slack.
  static constexpr int kSmemBytes =
      STAGES * kStageBytes + kGemmWsStagingBytes + BM * 4 + 2 * STAGES * 8 + 48 + 1024;

  // 128 producer threads: thread (r0 = tid / 8, ch = tid % 8) copies chunk
  // column ch of rows r0 + 16 j (A; B layout 0) or of k row r0 + 16 (j % 4)
  // in 64-column block j / 4 (B layout 1). In the 128-byte swizzle every one
  // of those lands 2048 j bytes after chunk 0 (row % 8 is the same for all).
  static constexpr int kAJ = BM / 16, kBJ = BN / 16;
  static_assert(BM % 16 == 0 && BN % 64 == 0, "the producer's plan: 16 rows of 8 chunks per pass");
  // gemm_tile_sources, called by the producer warpgroup, fills rows
  // threadIdx.x, threadIdx.x + blockDim.x, ...: one per producer thread,
  // which covers the tile only while BM <= 128 (session 28's 192-row variant
  // had to stride by 128).
  static_assert(BM <= 128, "the producer warpgroup fills one row source per thread");
  struct Plan {
    long long a[kAJ];  // element offset of A chunk j at k = 0 (LEAN_A: its address, row 0's if not a real row)
    int b[kBJ];        // element offset of B chunk j at k = 0, inside one expert's matrix
    unsigned a_ok;     // bit j: A chunk j is a real row
    unsigned b_ok;     // bit j: B chunk j is inside N
    int off0, kch, r0;
  };

  static __device__ __forceinline__ Plan make_plan(const GroupedGemmParams& p, const int* src, int col0, int tid) {
    Plan q;
    const int ch = tid & 7, r0 = tid >> 3;
    q.off0 = r0 * 128 + ((ch ^ (r0 & 7)) << 4);
    q.kch = ch * 8;
    q.r0 = r0;
    q.a_ok = q.b_ok = 0;
#pragma unroll
    for (int j = 0; j < kAJ; ++j) {
      const int s = src[r0 + 16 * j];
      q.a[j] = (long long)(s < 0 ? 0 : s) * p.lda + ch * 8;
      if constexpr (LEAN_A) {
        q.a[j] = reinterpret_cast<long long>(static_cast<const T*>(p.a) + q.a[j]);
        asm volatile("" : "+l"(q.a[j]));  // opaque: else the compiler re-derives it from the base per k-step
      }
      if (s >= 0) q.a_ok |= 1u << j;
    }
#pragma unroll
    for (int j = 0; j < kBJ; ++j) {
      int n;
      if constexpr (LAYOUT == 0) {
        n = col0 + r0 + 16 * j;
        q.b[j] = (n < p.N ? n : 0) * int(p.ldb) + ch * 8;
      } else {
        n = col0 + (j >> 2) * 64 + ch * 8;
        q.b[j] = (r0 + 16 * (j & 3)) * int(p.ldb) + (n < p.N ? n : 0);
      }
      if (n < p.N) q.b_ok |= 1u << j;
    }
    return q;
  }

  static __device__ __forceinline__ void load_stage(const GroupedGemmParams& p, const T* const* b, const Plan& q,
                                                    char* stage, int k0) {
    const T* a = static_cast<const T*>(p.a);
    const bool k_in = p.K - k0 - q.kch > 0;
    if constexpr (LEAN_A) {
      if (k0 + kGemmBK <= p.K) {  // every chunk inside its row (row 0's where the row is not real)
#pragma unroll
        for (int j = 0; j < kAJ; ++j)
          cp_async_16(stage + q.off0 + j * 2048, reinterpret_cast<const T*>(q.a[j]) + k0, q.a_ok >> j & 1u);
      } else {
#pragma unroll
        for (int j = 0; j < kAJ; ++j) {
          const bool ok = k_in && (q.a_ok >> j & 1u);
          cp_async_16(stage + q.off0 + j * 2048, ok ? reinterpret_cast<const T*>(q.a[j]) + k0 : a, ok);
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < kAJ; ++j) {
        const bool ok = k_in && (q.a_ok >> j & 1u);
        cp_async_16(stage + q.off0 + j * 2048, ok ? a + q.a[j] + k0 : a, ok);
      }
    }
    if constexpr (TMA) return;  // the weights come by tensor copy
#pragma unroll
    for (int m = 0; m < kB; ++m) {
      char* bs = stage + kABytes + m * kBBytes;
#pragma unroll
      for (int j = 0; j < kBJ; ++j) {
        if constexpr (LAYOUT == 0) {
          const bool ok = k_in && (q.b_ok >> j & 1u);
          cp_async_16(bs + q.off0 + j * 2048, ok ? b[m] + q.b[j] + k0 : b[m], ok);
        } else {
          const bool ok = k0 + q.r0 + 16 * (j & 3) < p.K && (q.b_ok >> j & 1u);
          cp_async_16(bs + q.off0 + j * 2048, ok ? b[m] + q.b[j] + (long long)k0 * p.ldb : b[m], ok);
        }
      }
    }
  }

  // Weight box number `box` of a stage: loaded into this CTA, or with mc
  // (CTA pairs whose tiles read the same weights) by the rank of its parity
  // into both CTAs.
  static __device__ __forceinline__ void weight_box(void* dst, const TmaDesc* map, int c0, int c1, int c2,
                                                    unsigned long long* bar, bool mc, unsigned rank, int box) {
    if constexpr (kPair) {
      if (mc) {
        if (unsigned(box & 1) == rank) tma_load_3d_multicast(dst, map, c0, c1, c2, bar, 0x3);
        return;
      }
    }
    tma_load_3d(dst, map, c0, c1, c2, bar);
  }

  // The map of matrix m (0, or 1 = `up`) for `expert`: in the parameters
  // (one per expert, or one over the stacked experts) or in global memory.
  static __device__ __forceinline__ const TmaDesc* weight_map(const Launch& L, int m, int expert) {
    if constexpr (kGlobalMaps) return L.maps[m] + expert;
    else return &L.map[m][TABLE ? expert : 0];
  }

  // Global maps were written by the previous kernel through the generic
  // proxy (build_tma_maps_kernel, which released them); the thread that
  // issues the copies acquires each for the tensormap proxy before its first
  // copy of an expert (each time the expert changes: cheap next to a tile).
  static __device__ __forceinline__ void acquire_maps(const Launch& L, int expert, int& fenced) {
    if constexpr (kGlobalMaps) {
      if (expert == fenced) return;
      fenced = expert;
#pragma unroll
      for (int m = 0; m < kB; ++m)
        asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(L.maps[m] + expert)
                     : "memory");
    }
  }

  // Thread 0: the stage's weight boxes (and with TMA_A its A box, rows
  // row0.., zeros past a_rows) by TMA, counted on the full barrier, which
  // expects the whole stage whether the peer loads half of it (mc) or not.
  static __device__ __forceinline__ void tma_stage(const Launch& L, int expert, char* stage, int row0, int col0,
                                                   int k0, unsigned long long* bar, bool mc, unsigned rank) {
    mbar_arrive_expect_tx(bar, (TMA_A ? kABytes : 0) + kB * kBBytes);
    if constexpr (TMA_A) tma_load_3d(stage, &L.a_map, k0, row0, 0, bar);  // box [BM rows][64 k]
    const int e = TABLE ? 0 : expert;
#pragma unroll
    for (int m = 0; m < kB; ++m) {
      char* bs = stage + kABytes + m * kBBytes;
      const TmaDesc* map = weight_map(L, m, expert);
      if constexpr (LAYOUT == 0) {
        weight_box(bs, map, k0, col0, e, bar, mc, rank, m);  // box [BN n][64 k]
      } else {
#pragma unroll
        for (int blk = 0; blk < BN / 64; ++blk)  // boxes [64 k][64 n], 8 KB apart
          weight_box(bs + blk * 8192, map, col0 + blk * 64, k0, e, bar, mc, rank, m * (BN / 64) + blk);
      }
    }
  }

  // Work unit j of this CTA (j = 0, 1, ...): a tile, or with CTA pairs a
  // tile pair. With the static walk unit first + j * stride (first: the
  // CTA's, or pair's, index; stride: the grid's); with the dynamic scheduler
  // (p.sched) the producer's thread 0 (rank 0's with pairs) takes the next
  // index from a global counter and publishes it in a ring of kTileRing
  // slots (tfull: 1 arrival; tempty: one per consumer warp, with pairs also
  // the peer's and rank 1's producer), so every role walks the same units in
  // the order they were handed out and the CTAs resident at one time stay on
  // neighbouring tiles (L2 sharing). An index >= units_total ends the walk.
  // The publisher also decodes the unit into its tiles (each rank's row and
  // column, and expert), so the tile order's loads (tile_order.cuh) run once
  // per unit, a ring ahead of the consumers, not on their way to the MMAs.
  // Both roles count k-steps g across units, so slot g % STAGES and its
  // phases run on unbroken; the producer fills the next tile's stages while
  // the consumers store this one.
  static constexpr int kTileRing = 2;
  // Tensor-store epilogues of two passes or more stage their odd passes in
  // the tile's last ring slot (store_tile_tma), where it holds both
  // warpgroups' staging.
  static constexpr bool kHoldSlot =
      TMA_C && Base::WN / Base::kPassCols > 1 && kStageBytes >= 2 * Base::kStagingBytes &&
      STAGGER == 0;  // (its staging waits for both warpgroups: that would undo a stagger)
  // tile: per slot kTileWords words, rank r's tile (row0 | col0 << 32, or
  // kNoTile) at [r] and both ranks' experts (rank 0's | rank 1's << 32) at
  // [2].
  static constexpr int kTileWords = 3;
  // Tiles in the ring with TMA weights (every default form); the kernel
  // with everything by cp.async keeps each role's own decode (its producer
  // has no registers to spare for the publisher's).
  static constexpr bool kRingTiles = TMA;
  static constexpr unsigned long long kNoTile = ~0ull;
  struct Sched {
    long long* ring;
    unsigned long long *tfull, *tempty;
    unsigned long long* tile;
  };
  static __device__ __forceinline__ long long units_total(const GroupedGemmParams& p) {
    return kPair ? (p.tiles_total + 1) / 2 : p.tiles_total;
  }
  // Waits on a barrier that, with pairs, the peer CTA may arrive on.
  static __device__ __forceinline__ void pair_wait(unsigned long long* bar, unsigned parity) {
    if constexpr (kPair) mbar_wait_cluster(smem_addr(bar), parity);
    else mbar_wait(bar, parity);
  }
  // An arrival on rank 0's copy of `bar` (from rank 1: remote).
  static __device__ __forceinline__ void arrive_on_rank0(unsigned long long* bar, unsigned rank) {
    if (kPair && rank != 0) mbar_arrive_remote(cluster_map(smem_addr(bar), 0));
    else mbar_arrive(bar);
  }
  // This CTA's part of unit u: its tile (mine: it has one) and, with pairs,
  // whether the peer's tile reads the same weights (mc). False: neither CTA
  // has a tile in the unit (work_in_slot, work_at).
  struct Work {
    GemmTile tile;
    bool mine, mc;
  };
  // Unit u's tiles as the ring's words (see Sched), written to `words` (the
  // ring slot in shared memory, so no array of them lives in registers).
  static __device__ __forceinline__ void decode_unit(const GroupedGemmParams& p, long long u, int tiles,
                                                     unsigned long long* words) {
    unsigned long long experts = 0;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
      const long long t = kPair ? 2 * u + r : u;
      GemmTile g;
      const bool ok = u < units_total(p) && t < p.tiles_total && gemm_tile_at<kRingTiles>(p, t, tiles, BM, BN, g);
      words[r] = ok ? unsigned(g.row0) | (static_cast<unsigned long long>(unsigned(g.col0)) << 32) : kNoTile;
      if (ok) experts |= static_cast<unsigned long long>(unsigned(g.expert)) << (32 * r);
    }
    words[2] = experts;
  }
  // Producer thread 0 (rank 0's with pairs): publish unit j.
  static __device__ __forceinline__ void publish_tile(const GroupedGemmParams& p, const Sched& q, int j, int tiles) {
    const int s = j % kTileRing;
    if (j >= kTileRing) pair_wait(q.tempty + s, unsigned(j / kTileRing - 1) & 1u);
    const long long idx = atomicAdd(p.sched, 1u);
    unsigned long long* words = q.tile + s * kTileWords;
    if constexpr (kRingTiles) decode_unit(p, idx, tiles, words);
    q.ring[s] = idx;
    if constexpr (kPair) {  // rank 1's copy first: the arrival releases the stores
      st_remote_u64(cluster_map(smem_addr(q.ring + s), 1), static_cast<unsigned long long>(idx));
#pragma unroll
      for (int i = 0; i < kTileWords; ++i) st_remote_u64(cluster_map(smem_addr(words + i), 1), words[i]);
      mbar_arrive_remote(cluster_map(smem_addr(q.tfull + s), 1));
    }
    mbar_arrive(q.tfull + s);
    if (idx >= units_total(p)) {  // this CTA's last fetch; the last fetcher resets the pair
      __threadfence();
      if (atomicAdd(p.sched + 1, 1u) == gridDim.x / CLUSTER - 1) {
        atomicExch(p.sched, 0u);
        atomicExch(p.sched + 1, 0u);
      }
    }
  }
  // Producer thread 0: unit j in this CTA's ring (published here, or by rank
  // 0 into rank 1's ring).
  static __device__ __forceinline__ void take_unit(const GroupedGemmParams& p, const Sched& q, int j, unsigned rank,
                                                   int tiles) {
    if (!kPair || rank == 0) publish_tile(p, q, j, tiles);
    else pair_wait(q.tfull + j % kTileRing, unsigned(j / kTileRing) & 1u);
  }
  // Consumer: read unit j and its tiles into w (every thread waits, lane 0
  // of each warp releases).
  static __device__ __forceinline__ long long read_tile(const GroupedGemmParams& p, const Sched& q, int j,
                                                        unsigned rank, Work& w, bool& any) {
    const int s = j % kTileRing;
    pair_wait(q.tfull + s, unsigned(j / kTileRing) & 1u);
    const long long idx = q.ring[s];
    if constexpr (kRingTiles) any = work_in_slot(p, q, s, rank, w);
    __syncwarp();
    if (threadIdx.x % 32 == 0) arrive_on_rank0(q.tempty + s, rank);
    return idx;
  }

  // The same from ring slot s, as the publisher decoded it.
  static __device__ __forceinline__ bool work_in_slot(const GroupedGemmParams& p, const Sched& q, int s, unsigned rank,
                                                      Work& w) {
    const unsigned long long* words = q.tile + s * kTileWords;
    const unsigned long long mine = words[kPair ? rank : 0], experts = words[2];
    w.mine = mine != kNoTile;
    w.tile.row0 = int(unsigned(mine)), w.tile.col0 = int(unsigned(mine >> 32));
    w.tile.expert = int(unsigned(experts >> (kPair ? 32 * rank : 0)));
    w.mc = false;
    if constexpr (!kPair) {
      return w.mine;
    } else {
      const unsigned long long peer = words[rank ^ 1u];
      const bool peer_ok = peer != kNoTile;
      w.mc = shares_weights(p, w, peer_ok, int(unsigned(experts >> (32 * (rank ^ 1u)))), int(unsigned(peer >> 32)));
      return w.mine || peer_ok;
    }
  }
  static __device__ __forceinline__ bool work_at(const GroupedGemmParams& p, long long u, int tiles, unsigned rank,
                                                 Work& w) {
    w.mc = false;
    if constexpr (!kPair) {
      w.mine = gemm_tile_at<kRingTiles>(p, u, tiles, BM, BN, w.tile);
      return w.mine;
    } else {
      GemmTile other;
      const long long mine = 2 * u + rank, peer = mine ^ 1;
      w.mine = mine < p.tiles_total && gemm_tile_at<kRingTiles>(p, mine, tiles, BM, BN, w.tile);
      const bool peer_ok = peer < p.tiles_total && gemm_tile_at<kRingTiles>(p, peer, tiles, BM, BN, other);
      w.mc = shares_weights(p, w, peer_ok, other.expert, other.col0);
      return w.mine || peer_ok;
    }
  }
  // Whether this rank's weight boxes are multicast: asked for, both tiles
  // real, and the peer's reads the same weights (expert and columns).
  static __device__ __forceinline__ bool shares_weights(const GroupedGemmParams& p, const Work& w, bool peer_ok,
                                                        int peer_expert, int peer_col0) {
    return p.multicast && w.mine && peer_ok && peer_expert == w.tile.expert && peer_col0 == w.tile.col0;
  }
  // A consumer warp's release of slot `empty_s` (with pairs: in both CTAs).
  // Its reads of the slot retired (wgmma.wait_group), and the slot is only
  // rewritten by TMA, so a CTA-scope arrival suffices (as CUTLASS's
  // multicast pipelines do); a cluster-scope release here costs a fence per
  // warp and k-step.
  // (empty_s: the barrier's shared::cta address.)
  static __device__ __forceinline__ void release_slot(unsigned empty_s, unsigned rank) {
    mbar_arrive(empty_s);
    if constexpr (kPair) mbar_arrive_remote_cta(cluster_map(empty_s, rank ^ 1u));
  }

  // TMA_C: the tile goes out by tensor stores. The warpgroup stages a pass,
  // fences it for the async proxy, and its thread 0 issues one store per
  // 64-row x 128-byte block; the TMA unit clips rows past M and columns past
  // N. The consumers go on to the next tile's MMAs while the stores drain;
  // thread 0 waits for them to have read the staging only before it is
  // rewritten (the next pass or tile), and for completion before it exits.
  // With `extra` (kHoldSlot: the tile's last ring slot, held back from the
  // producer), odd passes stage there, so pass 1 need not wait for pass 0's
  // stores to have read `buf`: that wait stalled every 2-pass tile mid-epilogue.
  // row_real (FILL): this thread's row of the block, rbase + tid % 64, is real.
  static __device__ __forceinline__ void store_tile_tma(const Launch& L, const float (&acc)[kB][kAcc], int wg,
                                                        int row0, int col0, char* buf, char* extra, int bar,
                                                        bool row_real = true) {
    using B = Base;
    const bool leader = threadIdx.x % 128 == 0;
    const int rbase = row0 + (wg / B::kWgN) * 64, cbase = col0 + (wg % B::kWgN) * B::WN;
    float scale[2];
    B::row_scales(L.p, wg, row0, scale);
    bool whole = true;       // every row real: tensor stores
    unsigned real_mask = 0;  // else: rows 32 * (warp % 2) + i of this warp's half with bit i set
    if constexpr (FILL) {
      whole = bar_red_and(bar, row_real);
      real_mask = __ballot_sync(0xffffffffu, row_real);
    }
#pragma unroll
    for (int q = 0; q < B::WN / B::kPassCols; ++q) {
      char* dst = extra && (q & 1) ? extra : buf;
      if (leader) {
        if (!extra || q == 0) bulk_wait_read();  // (q = 0: the previous tile's stores, long since read)
        else if (q >= 2) bulk_wait_read<1>();    // pass q - 2's, in the same buffer
      }
      // The staging is free. The first pass into `extra` waits for both
      // warpgroups (named barrier 4): the other one's last MMAs may still
      // read that slot (its A rows, the shared B).
      if (extra && q == 1) asm volatile("bar.sync 4, 256;\n" ::: "memory");
      else B::named_sync(bar);
      B::stage_pass(L.p, acc, q, scale, smem_addr(dst));
      fence_async_shared();  // generic-proxy writes, then the tensor stores read them
      B::named_sync(bar);
      if (whole) {
        if (leader) {
#pragma unroll
          for (int blk = 0; blk < B::kRowBytes / 128; ++blk)
            tma_store_3d(&L.c_map, dst + blk * 8192, cbase + q * B::kPassCols + blk * (128 / B::kOutBytes), rbase, 0);
          bulk_commit();
        }
      } else if constexpr (FILL) {
        // Warps w and w + 2 share the 32 rows whose marks warp w holds; the
        // next pass's barrier orders these reads before the staging is rewritten.
        const int warp = (threadIdx.x % 128) / 32, half = 32 * (warp & 1);
        for (int i = (warp >> 1) * 32 + int(threadIdx.x % 32); i < 32 * B::kChunks; i += 64) {
          const int r = i / B::kChunks, c = i % B::kChunks;
          if ((real_mask >> r) & 1u)
            B::store_staged_chunk(L.p, dst, half + r, c, rbase + half + r, cbase + q * B::kPassCols + c * B::kPer);
        }
      }
    }
  }

  static __device__ __forceinline__ void run(const Launch& L) {
    const GroupedGemmParams& p = L.p;
    extern __shared__ __align__(1024) char smem_raw[];
    char* smem = reinterpret_cast<char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
    char* staging = smem + STAGES * kStageBytes;
    int* src = reinterpret_cast<int*>(staging + kGemmWsStagingBytes);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(src + BM);  // BM * 4 is a multiple of 8
    unsigned long long* empty = full + STAGES;
    const Sched q{reinterpret_cast<long long*>(empty + STAGES + 2 * kTileRing), empty + STAGES,
                  empty + STAGES + kTileRing, empty + STAGES + 3 * kTileRing};
    const unsigned rank = kPair ? cluster_rank() : 0u;
    trace_stamp(0);
    if (threadIdx.x == 0) {
      // With pairs each slot is released by both CTAs' consumer warps, and
      // rank 0's tile ring is read by both CTAs (and rank 1's producer).
      for (int s = 0; s < STAGES; ++s)
        mbar_init(full + s, TMA_A ? 1 : TMA ? 129 : 128), mbar_init(empty + s, kPair ? 16 : 8);
      for (int s = 0; s < kTileRing; ++s) mbar_init(q.tfull + s, 1), mbar_init(q.tempty + s, kPair ? 17 : 8);
      mbar_init_fence();
    }
    grid_dependency_begin();  // after the shared-memory setup, before any global access
    trace_stamp(1);
    if constexpr (kPair) cluster_sync();  // both CTAs' barriers initialised before any remote arrival
    else __syncthreads();

    const bool dynamic = p.sched != nullptr;
    const int tiles = p.num_tiles ? *p.num_tiles : (p.M + BM - 1) / BM;
    const long long units = units_total(p), first = blockIdx.x / CLUSTER, stride = gridDim.x / CLUSTER;
    const int kt = (p.K + kGemmBK - 1) / kGemmBK;
    const int wg = threadIdx.x / 128;
    unsigned g = 0;  // k-steps of this CTA so far, over all its units
    int fenced = -1;  // the expert whose global maps the copying thread acquired last (acquire_maps)
    Work w;
    if (wg == 0) {  // producer
      // Registers: all 384 threads start with 168 (launch bounds); the
      // producer gives back down to kProducerRegs and the consumers take up
      // to kConsumerRegs: room for 128 accumulators and the epilogue's staged
      // stores without spills (CPU test
      // WarpSpecialisedKernelsCompileWithoutSpills). The two must balance,
      // 128 x (168 - kProducerRegs) = 256 x (kConsumerRegs - 168):
      // setmaxnreg.inc waits for registers the CTA's own warps released, so
      // asking for more hangs.
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs) : "memory");
      if constexpr (TMA_A) {  // one thread issues every copy
        if (threadIdx.x != 0) {
          // Warps 1..3 run the fused combine, if any (grouped_gemm_combine.cuh).
          if constexpr (kCombineOk) {
            if (p.comb_sync && threadIdx.x >= 32) Comb::run(p, tiles);
          }
          return;
        }
        for (int j = 0;; ++j) {
          long long u = first + j * stride;
          bool any;
          if (dynamic) {
            take_unit(p, q, j, rank, tiles);
            u = q.ring[j % kTileRing];
            if constexpr (kRingTiles) any = work_in_slot(p, q, j % kTileRing, rank, w);
            if (kPair && rank != 0) arrive_on_rank0(q.tempty + j % kTileRing, rank);
          }
          if (u >= units) break;
          if (!dynamic || !kRingTiles) any = work_at(p, u, tiles, rank, w);
          if (!any) continue;
          if (g == 0) trace_stamp_here(2);
          const bool mine = !kPair || w.mine;  // else a k-step walk without loads (the peer's tile is real)
          if (mine) acquire_maps(L, w.tile.expert, fenced);
          for (int t = 0; t < kt; ++t, ++g) {
            const unsigned s = g % STAGES;
            if (g >= STAGES) mbar_wait(empty + s, (g / STAGES - 1) & 1u);
            if (mine)
              tma_stage(L, w.tile.expert, smem + s * kStageBytes, w.tile.row0, w.tile.col0, t * kGemmBK, full + s,
                        w.mc, rank);
            else
              mbar_arrive(full + s);
          }
        }
        trace_stamp_here(3);
        if constexpr (kPair) cluster_sync();
        return;
      }
      for (int j = 0;; ++j) {
        // Named barrier 1 (the producer warpgroup): every thread made its
        // previous plan and read the previous index before thread 0 publishes
        // the next one and the sources are rewritten (and, with pairs, rank
        // 1's thread 0 tells rank 0 its ring slot is read).
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        if (dynamic && threadIdx.x == 0) {
          if (kPair && rank != 0 && j > 0) arrive_on_rank0(q.tempty + (j - 1) % kTileRing, rank);
          take_unit(p, q, j, rank, tiles);
        }
        if (dynamic) asm volatile("bar.sync 1, 128;\n" ::: "memory");
        const long long u = dynamic ? q.ring[j % kTileRing] : first + j * stride;
        if (u >= units) break;
        if (!(dynamic && kRingTiles ? work_in_slot(p, q, j % kTileRing, rank, w) : work_at(p, u, tiles, rank, w)))
          continue;
        if (g == 0) trace_stamp(2);
        const bool mine = !kPair || w.mine;
        if (mine) gemm_tile_sources(p, w.tile.row0, BM, src);
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        const T* b[2] = {nullptr, nullptr};
        if constexpr (!TMA) {
#pragma unroll
          for (int m = 0; m < kB; ++m) b[m] = gemm_expert_weights<T, TABLE>(L, m, w.tile.expert);
        }
        const Plan plan = make_plan(p, src, w.tile.col0, threadIdx.x);
        if (TMA && mine && threadIdx.x == 0) acquire_maps(L, w.tile.expert, fenced);
        for (int t = 0; t < kt; ++t, ++g) {
          const unsigned s = g % STAGES;
          if (g >= STAGES) mbar_wait(empty + s, (g / STAGES - 1) & 1u);  // CTA scope: see release_slot
          if constexpr (TMA) {
            if (threadIdx.x == 0) {
              if (mine)
                tma_stage(L, w.tile.expert, smem + s * kStageBytes, w.tile.row0, w.tile.col0, t * kGemmBK, full + s,
                          w.mc, rank);
              else
                mbar_arrive(full + s);
            }
          }
          if (mine) load_stage(p, b, plan, smem + s * kStageBytes, t * kGemmBK);
          mbar_arrive_on_cp_async(full + s);  // with no copies in flight: at once
        }
      }
      cp_async_wait_all();  // no thread leaves with copies in flight
      trace_stamp(3);
      if constexpr (kPair) cluster_sync();
      return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs) : "memory");
    // Consumer 0 or 1: its 64-row half (BM = 128) or column half (BM = 64).
    // Broadcast from lane 0, so the compiler knows it is warp-uniform and
    // keeps what derives from it (the MMA descriptors) in uniform registers.
    const int cw = __shfl_sync(0xffffffffu, wg - 1, 0);
    // Shared addresses of the ring and its barriers, from the base's shared
    // address (a constant: generic pointers are converted through the CTA's
    // cluster id, which the compiler re-read on the way to each k-step's
    // MMAs). The shared window is aligned far beyond 1024 bytes, so aligning
    // either address gives the same offset.
    const unsigned ring_at = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const unsigned full_at = ring_at + unsigned(reinterpret_cast<char*>(full) - smem), empty_at = full_at + 8 * STAGES;
    const bool releaser = threadIdx.x % 32 == 0;  // one arrival per consumer warp
    // LEAN_DESC: this warpgroup's stage-0 descriptors, broadcast from lane 0
    // so the compiler keeps them uniform instead of re-deriving them.
    unsigned long long a0 = 0, b0 = 0;
    if constexpr (LEAN_DESC) {
      a0 = __shfl_sync(0xffffffffu, Base::stage0_a_desc(ring_at, cw), 0);
      b0 = __shfl_sync(0xffffffffu, Base::stage0_b_desc(ring_at, cw), 0);
    }
    // kHoldSlot: a tile's last slot stays unreleased through its epilogue
    // (odd passes stage in it) and is released after the next k-step's MMAs
    // are issued, once this warpgroup's stores have read it; the producer
    // meanwhile fills the other STAGES - 1 slots. `held`: the slot, or -1.
    int held = -1;
    const auto release_held = [&] {
      if (threadIdx.x % 128 == 0) bulk_wait_read();
      Base::named_sync(2 + cw);
      if (releaser) {
        // (LEAN_DESC: from the precomputed address; else the pointer's, as
        // the default kernels have always done)
        if constexpr (LEAN_DESC) release_slot(empty_at + 8 * unsigned(held), rank);
        else release_slot(smem_addr(empty + held), rank);
      }
      held = -1;
    };
    const bool tracer = kTraceOn && threadIdx.x % 128 == 0;  // thread 0 of each consumer warpgroup
    // The fused combine (kCombineOk, p.comb_sync): thread 0 of the warpgroup
    // publishes each row tile's stores once they have completed, which it
    // checks at the next tile's epilogue (long after) or at the end, so the
    // wait never stalls the MMAs. pending: that row tile, or -1.
    const bool comb = kCombineOk && p.comb_sync != nullptr, comb_leader = comb && threadIdx.x % 128 == 0;
    int pending = -1;
    // STAGGER: warpgroup 0 lets warpgroup 1 go (named barrier 5) after its
    // first STAGGER k-steps, and at the latest before its second unit: its
    // third would need warpgroup 1's reading of the tile ring's first.
    bool go_sent = STAGGER == 0 || cw == 1;
    const auto send_go = [&] {
      asm volatile("bar.arrive 5, 256;\n" ::: "memory");
      go_sent = true;
    };
    if (STAGGER && cw == 1) asm volatile("bar.sync 5, 256;\n" ::: "memory");
    for (int j = 0;; ++j) {
      if (STAGGER && !go_sent && j >= 1) send_go();
      bool any;
      const long long u = dynamic ? read_tile(p, q, j, rank, w, any) : first + j * stride;
      if (u >= units) break;
      if (!dynamic || !kRingTiles) any = work_at(p, u, tiles, rank, w);
      if (!any) {
        if constexpr (kCombineOk) {
          if (comb_leader) Comb::skip(p, u, tiles);
        }
        continue;
      }
      if (tracer) {  // (no accumulators live here: stamps there cost the consumers spills)
        if (g == 0) trace_stamp_here(cw ? 7 : 4);
        trace_stamp_here(cw ? 8 : 5);  // every tile's start: the last one's stays
      }
      const bool mine = !kPair || w.mine;
      float acc[kB][kAcc];
#pragma unroll
      for (int m = 0; m < kB; ++m)
#pragma unroll
        for (int jj = 0; jj < kAcc; ++jj) acc[m][jj] = 0.f;
      // A 64-row half that holds no rows (p.tile_fill) computes nothing but
      // keeps the ring's protocol: it waits for each stage and releases it.
      // So does a pair's rank without a tile.
      const bool live = mine && (BM != 128 || !p.tile_fill || p.tile_fill[w.tile.row0 + 64 * cw] >= 0);
      int mark = 0;  // FILL: p.store_fill of this thread's row in the epilogue's block (see store_tile_tma)
      if constexpr (FILL) {
        const int row = w.tile.row0 + (cw / Base::kWgN) * 64 + int(threadIdx.x % 64);
        if (mine) mark = row < p.M ? __ldg(p.store_fill + row) : -1;
      }
      for (int t = 0; t < kt; ++t, ++g) {
        const unsigned s = g % STAGES;
        // LEAN_DESC: the stage's offset broadcast (the compiler then adds the
        // descriptors in uniform registers), before the wait: off its path.
        unsigned soff = 0;
        if constexpr (LEAN_DESC) soff = __shfl_sync(0xffffffffu, s * unsigned(kStageBytes >> 4), 0);
        mbar_wait(full_at + 8 * s, (g / STAGES) & 1u);
        // The generic-proxy cp.async writes, seen through the barrier, before
        // wgmma reads them. With A by TMA every write into a stage is a
        // tensor copy (async proxy, published by the barrier's transaction
        // count), so the fence has nothing to order.
        if constexpr (!TMA_A) fence_async_shared();
        if constexpr (LEAN_DESC) {
          if (live) Base::compute_stage_from(a0, b0, soff, acc);
        } else if (live) {
          Base::compute_stage(ring_at + s * kStageBytes, cw, acc);
        }
        if (STAGGER && !go_sent && t + 1 >= STAGGER) send_go();
        wgmma_wait<1>();  // the MMAs of k-step g - 1 retired: its slot may be refilled
        if (t > 0 && releaser) release_slot(empty_at + 8 * ((g - 1) % STAGES), rank);
        if (kHoldSlot && held >= 0) release_held();
      }
      wgmma_wait<0>();
      const bool hold = kHoldSlot && mine && kt > 0;
      if (kt > 0 && releaser && !hold) release_slot(empty_at + 8 * ((g - 1) % STAGES), rank);  // the tile's last slot
      if (!mine) continue;
      if constexpr (kCombineOk) {
        if (comb_leader && pending >= 0) Comb::publish(p, pending);
        pending = w.tile.row0 / BM;
      }
      if constexpr (TMA_C) {
        char* extra = nullptr;
        if (hold) {
          held = int((g - 1) % STAGES);
          extra = smem + held * kStageBytes + cw * Base::kStagingBytes;
        }
        store_tile_tma(L, acc, cw, w.tile.row0, w.tile.col0, staging + cw * Base::kStagingBytes, extra, 2 + cw,
                       mark >= 0);
      } else
        Base::store_tile_staged(p, acc, cw, w.tile.row0, w.tile.col0, staging + cw * Base::kStagingBytes, 2 + cw);
    }
    if (kHoldSlot && held >= 0) release_held();  // (no producer waits for it; keeps the counts whole)
    if (STAGGER && !go_sent) send_go();
    if constexpr (TMA_C) {
      if (threadIdx.x % 128 == 0) bulk_wait();  // the staging stays until the last stores are done
    }
    if constexpr (kCombineOk) {
      if (comb_leader) {
        if (pending >= 0) Comb::publish(p, pending);
        Comb::role_done(p, tiles);
      }
    }
    if (tracer) trace_stamp_here(cw ? 9 : 6);
    if constexpr (kPair) cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
  }
};

// Trace slots (compile option `trace`): thread 0 at entry (0) and past the
// dependency wait (1); the producer at its first tile (2) and done (3);
// consumer warpgroup 0 (1) at its first tile's start 4 (7), its last tile's
// start 5 (8), and done with every store 6 (9). A CTA's tiles run from 4 to
// 6; 6 - 5 is its last tile. (None while accumulators are live: the
// consumers are at their register limit.)
template <typename T, typename OutT, int BM, int BN, int STAGES, int LAYOUT, bool DUAL, int TABLE, bool TMA,
          bool TMA_A, bool TMA_C, int CLUSTER, int STAGGER = 0, bool LEAN_A = false, bool LEAN_DESC = false,
          bool FILL = false>
__global__ void __launch_bounds__(384, 1)
    grouped_gemm_sm90_ws_kernel(const __grid_constant__ typename GroupedGemmLaunchOf<TMA, TABLE ? TABLE : 1>::type L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  GroupedGemmSm90Ws<T, OutT, BM, BN, STAGES, LAYOUT, DUAL, TABLE, TMA, TMA_A, TMA_C, CLUSTER, STAGGER, LEAN_A,
                    LEAN_DESC, FILL>::run(L);
#endif
}

}  // namespace tc::moe
