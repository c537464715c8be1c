#pragma once
// moe_grouped_gemm, Hopper path (sm_90a): the same contract as the mma.sync
// kernel (grouped_gemm.cuh), with the MMAs issued as warpgroup wgmma from
// shared memory. A CTA is two warpgroups. BM = 128: each owns 64 rows and all
// BN columns; BM = 64 (groups of a few hundred rows, where 128-row tiles
// would be half padding): each owns all 64 rows and half the columns. BN is
// per matrix; gated tiles hold gate and up accumulators side by side. K walks in 64-wide steps through a STAGES-deep
// ring filled by cp.async (A rows are gathered through a_index, which TMA
// cannot do on Hopper), laid out in the 128-byte swizzle wgmma reads:
//   A, B [N, K]: one 128-byte row per M/N index, chunk ^= row % 8
//                (K-major; 8-row groups 1024 bytes apart);
//   B [K, N]:    64-column blocks of [64 k][64 n], chunk ^= k % 8
//                (N-major; blocks 8 KB apart, 8-k-row groups 1024 bytes apart).
// Requires VEC-aligned shapes (16-byte rows); the host picks this path only then.
#include "moe/grouped_gemm.cuh"
#include "tile/mbarrier.cuh"
#include "tile/wgmma_ops.cuh"

namespace tc::moe {

// Shared-memory matrix descriptor: start (a 32-bit shared::cta address),
// leading and stride byte offsets (16-byte units), 128-byte swizzle. From
// an address, not a generic pointer: the conversion reads the CTA's
// cluster id (S2UR SR_CgaCtaId), which sat on the consumers' path from a
// stage's arrival to its first MMA in every k-step (session 32's ncu).
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  unsigned long long d = (addr & 0x3FFFF) >> 4;
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
  d |= 1ull << 62;  // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// cp.async writes go through the generic proxy; wgmma reads through the async one.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

template <typename T, typename OutT, int BM, int BN, int STAGES, int LAYOUT, bool DUAL, int TABLE>
struct GroupedGemmSm90 {
  static constexpr int kThreads = 256;
  static constexpr int kWgM = BM / 64, kWgN = 2 / kWgM;  // warpgroup grid over the tile
  static constexpr int WN = BN / kWgN;                  // columns per warpgroup (the wgmma N)
  static constexpr int kB = DUAL ? 2 : 1;
  static constexpr int kABytes = BM * kGemmBK * 2;
  static constexpr int kBBytes = BN * kGemmBK * 2;
  static constexpr int kStageBytes = kABytes + kB * kBBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes + BM * 4 + 1024;  // + alignment slack
  static constexpr int kAcc = WN / 2;  // fp32 accumulators per thread per matrix (m64 x WN over 128 threads)
  // Gated tiles whose warpgroups each own all columns: gate's and up's B
  // tiles lie back to back in the stage with the same stride, so one wgmma of
  // twice the width reads both, and its accumulator (columns 8j.. at entries
  // 4j..) is gate's acc[0] followed by up's acc[1]. One m64n(2WN) instead of
  // two m64nWN reads the A slice from shared memory once, not twice.
  static constexpr bool kDualAsOne = DUAL && kWgN == 1 && 2 * WN <= 256;
  static_assert(BM == 64 || BM == 128, "64- or 128-row tiles");
  static_assert(WN == 64 || WN == 128 || WN == 256, "wgmma N");
  static_assert(STAGES >= 3, "prefetch distance STAGES - 2");
  static_assert(kStageBytes % 1024 == 0, "stages keep 1024-byte swizzle atoms aligned");
  static_assert(kThreads == 256 && BM % 32 == 0 && BN % 64 == 0, "the load plan: 32 rows of 8 chunks per pass");

  // Each thread copies the same chunks of every stage: chunk j of A is row
  // r0 + 32 j, chunk j of B row (layout 0) r0 + 32 j, or (layout 1) k row
  // r0 + 32 (j & 1) of 64-column block j / 2, all at 16-byte column ch. In
  // both swizzles those land 4096 j bytes after chunk 0, so the plan is made
  // once per tile and a k-step is one add and one cp.async per chunk (the
  // per-chunk index math and shared-memory row lookups dominated issue).
  static constexpr int kAJ = BM / 32, kBJ = BN / 32;
  struct LoadPlan {
    long long a[kAJ];  // element offset of A chunk j at k = 0
    long long b[kBJ];  // element offset of B chunk j at k = 0
    int b_left[kBJ];   // layout 0: 8 if the row is inside N, else 0; layout 1: columns left (N tail)
    unsigned a_ok;     // bit j: A chunk j is a real row (not padding)
    int off0, kch, kr; // shared offset of chunk 0; this thread's k column; layout 1: k row of even chunks
  };

  static __device__ __forceinline__ LoadPlan make_plan(const GroupedGemmParams& p, const int* src, int col0) {
    LoadPlan q;
    const int ch = threadIdx.x & 7, r0 = threadIdx.x >> 3;
    q.off0 = r0 * 128 + ((ch ^ (r0 & 7)) << 4);
    q.kch = ch * 8;
    q.kr = r0;
    q.a_ok = 0;
#pragma unroll
    for (int j = 0; j < kAJ; ++j) {
      const int s = src[r0 + 32 * j];
      q.a[j] = (long long)(s < 0 ? 0 : s) * p.lda + ch * 8;
      if (s >= 0) q.a_ok |= 1u << j;
    }
#pragma unroll
    for (int j = 0; j < kBJ; ++j) {
      if constexpr (LAYOUT == 0) {
        const int n = col0 + r0 + 32 * j;
        q.b[j] = (long long)(n < p.N ? n : 0) * p.ldb + ch * 8;
        q.b_left[j] = n < p.N ? 8 : 0;
      } else {
        const int n = col0 + (j >> 1) * 64 + ch * 8;
        q.b[j] = (long long)(r0 + 32 * (j & 1)) * p.ldb + (n < p.N ? n : 0);
        q.b_left[j] = p.N - n;
      }
    }
    return q;
  }

  static __device__ __forceinline__ void load_stage(const GroupedGemmParams& p, const T* const* b, const LoadPlan& q,
                                                    char* stage, int k0) {
    const T* a = static_cast<const T*>(p.a);
    const bool k_in = p.K - k0 - q.kch > 0;  // this thread's column of the step is inside K
#pragma unroll
    for (int j = 0; j < kAJ; ++j) {
      const bool ok = k_in && (q.a_ok >> j & 1u);
      cp_async_16(stage + q.off0 + j * 4096, ok ? a + q.a[j] + k0 : a, ok);
    }
#pragma unroll
    for (int m = 0; m < kB; ++m) {
      char* bs = stage + kABytes + m * kBBytes;
#pragma unroll
      for (int j = 0; j < kBJ; ++j) {
        if constexpr (LAYOUT == 0) {
          const bool ok = k_in && q.b_left[j] > 0;
          cp_async_16(bs + q.off0 + j * 4096, ok ? b[m] + q.b[j] + k0 : b[m], ok);
        } else {
          const bool ok = k0 + q.kr + 32 * (j & 1) < p.K && q.b_left[j] > 0;
          cp_async_16(bs + q.off0 + j * 4096, ok ? b[m] + q.b[j] + (long long)k0 * p.ldb : b[m], ok);
        }
      }
    }
  }

  // B descriptor of warpgroup column wn, k16 slice ks, of the B tile at bs.
  static __device__ __forceinline__ unsigned long long b_desc(unsigned bs, int wn, int ks) {
    if constexpr (LAYOUT == 0) return wgmma_desc(bs + wn * WN * 128 + ks * 32, 16, 1024);
    return wgmma_desc(bs + wn * (WN / 64) * 8192 + ks * 16 * 128, 8192, 1024);  // LBO: next 64 columns; SBO: next 8 k rows
  }

  // compute_stage's MMAs from this warpgroup's descriptors of stage 0 (a0,
  // b0: of its A rows and its B columns) and the stage's offset from stage 0
  // in 16-byte units: the same descriptors by one add each (a descriptor's
  // start field is address / 16, and no offset inside the ring carries out
  // of its 14 bits).
  static __device__ __forceinline__ void compute_stage_from(unsigned long long a0, unsigned long long b0,
                                                            unsigned soff, float (&acc)[kB][kAcc]) {
    wgmma_fence();
    // Only the low word moves (32-bit adds: no carry to propagate).
    const unsigned a_lo = unsigned(a0) + soff, b_lo = unsigned(b0) + soff;
    const unsigned long long a_hi = a0 & ~0xFFFFFFFFull, b_hi = b0 & ~0xFFFFFFFFull;
#pragma unroll
    for (int ks = 0; ks < kGemmBK / 16; ++ks) {
      const unsigned long long da = a_hi | (a_lo + 2 * ks);                             // + ks * 32 bytes
      const unsigned long long db = b_hi | (b_lo + (LAYOUT == 0 ? 2 * ks : 128 * ks));  // + ks * 32, or 16 k rows
      if constexpr (kDualAsOne) {
        Wgmma<T, 2 * WN, LAYOUT>::run(reinterpret_cast<float(&)[2 * kAcc]>(acc), da, db, 1);
      } else {
#pragma unroll
        for (int m = 0; m < kB; ++m) Wgmma<T, WN, LAYOUT>::run(acc[m], da, db + m * (kBBytes >> 4), 1);
      }
    }
    wgmma_commit();
  }
  // Those stage-0 descriptors for warpgroup wg of the ring at `ring`.
  static __device__ __forceinline__ unsigned long long stage0_a_desc(unsigned ring, int wg) {
    return wgmma_desc(ring + (wg / kWgN) * 64 * 128, 16, 1024);
  }
  static __device__ __forceinline__ unsigned long long stage0_b_desc(unsigned ring, int wg) {
    return b_desc(ring + kABytes, kDualAsOne ? 0 : wg % kWgN, 0);
  }

  // The stage at shared address `stage`.
  static __device__ __forceinline__ void compute_stage(unsigned stage, int wg, float (&acc)[kB][kAcc]) {
    const int wm = wg / kWgN, wn = wg % kWgN;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kGemmBK / 16; ++ks) {
      // A: this warpgroup's 64 rows; k16 slices are 32 bytes apart inside the swizzled rows.
      const unsigned long long da = wgmma_desc(stage + wm * 64 * 128 + ks * 32, 16, 1024);
      if constexpr (kDualAsOne) {
        Wgmma<T, 2 * WN, LAYOUT>::run(reinterpret_cast<float(&)[2 * kAcc]>(acc), da, b_desc(stage + kABytes, 0, ks), 1);
      } else {
#pragma unroll
        for (int m = 0; m < kB; ++m) Wgmma<T, WN, LAYOUT>::run(acc[m], da, b_desc(stage + kABytes + m * kBBytes, wn, ks), 1);
      }
    }
    wgmma_commit();
  }

  // Outputs j (entries 4j + 2h, 4j + 2h + 1) of the accumulators, before the
  // row scale: silu(gate) * up when gated.
  static __device__ __forceinline__ void epilogue_pair(const float (&acc)[kB][kAcc], int j, int h, float& v0,
                                                       float& v1) {
    v0 = acc[0][4 * j + 2 * h], v1 = acc[0][4 * j + 2 * h + 1];
    if constexpr (DUAL) {
      v0 = gemm_silu(v0) * acc[kB - 1][4 * j + 2 * h];
      v1 = gemm_silu(v1) * acc[kB - 1][4 * j + 2 * h + 1];
    }
  }

  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w + lane/4 (+8);
  // entry 4j + {0,1} (+{2,3} for row + 8) are columns 8j + 2*(lane%4) + {0,1}.
  // wg: the warpgroup's index among those holding accumulators.
  static __device__ __forceinline__ void store_tile(const GroupedGemmParams& p, const float (&acc)[kB][kAcc], int wg,
                                                    int row0, int col0) {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int wm = wg / kWgN, wn = wg % kWgN;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + wm * 64 + warp * 16 + (lane >> 2) + h * 8;
      if (row >= p.M) continue;
      const float scale = p.row_scale ? p.row_scale[row] : 1.0f;
#pragma unroll
      for (int j = 0; j < WN / 8; ++j) {
        const int col = col0 + wn * WN + j * 8 + (lane & 3) * 2;
        float v0, v1;
        epilogue_pair(acc, j, h, v0, v1);
        gemm_store_pair<OutT, true>(p, row, col, v0 * scale, v1 * scale);
      }
    }
  }

  // Staged epilogue (the warp-specialised kernel). Stored straight from the
  // accumulator layout, each warp store instruction writes 4 bytes per lane
  // into 8 rows: 8 L2 requests of half-filled 32-byte sectors. Timing the
  // kernels with no epilogue at all (session 13, race case 2) put the
  // stores at half of the down projection's time. Here the warpgroup writes
  // its 64 x WN outputs to shared memory, kPassCols columns per pass, and
  // then stores them as whole 16-byte chunks, 8 or 16 lanes per row, so one
  // instruction fills 2 to 4 whole 128-byte lines (or, in the
  // warp-specialised kernel with TMA_C, one thread hands them to the TMA
  // unit). Staged rows: see staged_offset; the chunk reads (8 lanes, one row)
  // are conflict-free too. bar: this warpgroup's named barrier (128 threads).
  static constexpr int kOutBytes = sizeof(OutT);
  static constexpr int kPassCols = WN * kOutBytes < 256 ? WN : 256 / kOutBytes;
  static constexpr int kRowBytes = kPassCols * kOutBytes;  // 128 or 256
  static constexpr int kChunks = kRowBytes / 16;           // per staged row
  static constexpr int kStagingBytes = 64 * kRowBytes;     // per warpgroup
  static_assert(kRowBytes == 128 || kRowBytes == 256, "8 or 16 chunks per staged row");
  static_assert(2 * kStagingBytes <= kGemmWsStagingBytes, "two warpgroups' staged rows in the host's reserve");

  static __device__ __forceinline__ void named_sync(int bar) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(bar) : "memory");
  }

  // Byte b of staged row r (b < kRowBytes), in the layout a TMA store with
  // 128-byte swizzle reads: 128-byte column blocks of 64 rows, 8 KB apart,
  // 16-byte chunk c of row r at c ^ (r % 8) (the blocks start 1024-byte
  // aligned). Conflict-free for the fragment writes: 8 rows x 4 lanes land
  // in 8 distinct chunks.
  static __device__ __forceinline__ int staged_offset(int r, int b) {
    return (b >> 7) * 8192 + r * 128 + ((((b >> 4) & 7) ^ (r & 7)) << 4) + (b & 15);
  }

  // Pass q of the warpgroup's outputs (columns q * kPassCols.. of its WN)
  // into the staged rows at shared address `buf` (a 32-bit shared::cta
  // address: with a generic pointer, which the tensor-store epilogue's two
  // buffers made of it, every store was a generic ST with 64-bit address
  // arithmetic; session 29's ncu of race 2's down projection put those at
  // about half of the epilogue's stall samples). silu(gate) * up when gated,
  // times the row scale. 16-bit outputs go by stmatrix: the accumulator
  // layout is the m8n8 fragment layout, so one x4 instruction stores four
  // 8 x 8 blocks (column blocks jj, jj + 1 of rows +0 and +8), each of 8
  // staged rows' 16-byte chunks, conflict-free in the swizzle: a quarter of
  // the 4-byte stores' instructions.
  static __device__ __forceinline__ void stage_pass(const GroupedGemmParams& p, const float (&acc)[kB][kAcc], int q,
                                                    const float (&scale)[2], unsigned buf) {
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    if constexpr (kOutBytes == 2) {
      static_assert(kPassCols % 16 == 0, "pairs of 8-column blocks per stmatrix");
      // Lane l gives the row address of block l / 8: row +8 for odd blocks,
      // column block jj + 1 for blocks 2 and 3. With jj even, the chunk of
      // column block jj + jsel is (jj % 8) ^ jsel, swizzled by the row.
      const int r = warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7), jsel = lane >> 4;
      const unsigned row_base = buf + unsigned(r * 128);
      const int x = jsel ^ (r & 7);
#pragma unroll
      for (int jj = 0; jj < kPassCols / 8; jj += 2) {
        unsigned v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // block i: column block jj + i / 2, rows + 8 (i % 2)
          float v0, v1;
          epilogue_pair(acc, q * (kPassCols / 8) + jj + i / 2, i % 2, v0, v1);
          const OutT o[2] = {from_float<OutT>(v0 * scale[i % 2]), from_float<OutT>(v1 * scale[i % 2])};
          v[i] = *reinterpret_cast<const unsigned*>(o);
        }
        const unsigned dst = row_base + unsigned((jj >> 3) * 8192 + (((jj & 7) ^ x) << 4));
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v[0]),
                     "r"(v[1]), "r"(v[2]), "r"(v[3])
                     : "memory");
      }
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + (lane >> 2) + h * 8;
#pragma unroll
        for (int jj = 0; jj < kPassCols / 8; ++jj) {
          float v0, v1;
          epilogue_pair(acc, q * (kPassCols / 8) + jj, h, v0, v1);
          const unsigned dst = buf + unsigned(staged_offset(r, (jj * 8 + (lane & 3) * 2) * kOutBytes));
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(dst), "f"(v0 * scale[h]), "f"(v1 * scale[h])
                       : "memory");
        }
      }
    }
  }

  // The row scales of this thread's two fragment rows (1 past M or without scales).
  static __device__ __forceinline__ void row_scales(const GroupedGemmParams& p, int wg, int row0, float (&scale)[2]) {
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + (wg / kWgN) * 64 + warp * 16 + (lane >> 2) + h * 8;
      scale[h] = p.row_scale && row < p.M ? p.row_scale[row] : 1.0f;
    }
  }

  static constexpr int kPer = 16 / kOutBytes;  // elements per staged chunk

  // Chunk c of staged row r (staging at `buf`) to C's row `row`, columns
  // `col`..; the caller checks row < M. Columns past N are left out.
  static __device__ __forceinline__ void store_staged_chunk(const GroupedGemmParams& p, const char* buf, int r, int c,
                                                            int row, int col) {
    if (col >= p.N) return;
    const uint4 v = *reinterpret_cast<const uint4*>(buf + staged_offset(r, c * 16));
    OutT* dst = static_cast<OutT*>(p.c) + (long long)row * p.ldc + col;
    if (p.ldc % kPer == 0 && col + kPer <= p.N) {  // rows start on 16 bytes (the base is 16-byte aligned)
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      const OutT* e = reinterpret_cast<const OutT*>(&v);
#pragma unroll
      for (int k = 0; k < kPer; ++k)  // static indices keep v in registers
        if (col + k < p.N) dst[k] = e[k];
    }
  }

  static __device__ __forceinline__ void store_tile_staged(const GroupedGemmParams& p, const float (&acc)[kB][kAcc],
                                                           int wg, int row0, int col0, char* buf, int bar) {
    const int tid = threadIdx.x % 128;
    const int rbase = row0 + (wg / kWgN) * 64, cbase = col0 + (wg % kWgN) * WN;
    float scale[2];
    row_scales(p, wg, row0, scale);
#pragma unroll
    for (int q = 0; q < WN / kPassCols; ++q) {
      named_sync(bar);  // the previous pass's (or tile's) chunk reads are done
      stage_pass(p, acc, q, scale, smem_addr(buf));
      named_sync(bar);  // the pass is staged
#pragma unroll 4
      for (int i = 0; i < kChunks / 2; ++i) {
        const int idx = tid + 128 * i, r = idx / kChunks, c = idx % kChunks;
        if (rbase + r < p.M) store_staged_chunk(p, buf, r, c, rbase + r, cbase + q * kPassCols + c * kPer);
      }
    }
  }

  static __device__ __forceinline__ void run(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L) {
    const GroupedGemmParams& p = L.p;
    extern __shared__ __align__(1024) char smem_raw[];
    char* smem = reinterpret_cast<char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
    GemmTile tile;
    if (!gemm_tile_owned(p, BM, BN, tile)) return;
    const int row0 = tile.row0, col0 = tile.col0;
    int* src = reinterpret_cast<int*>(smem + STAGES * kStageBytes);
    gemm_tile_sources(p, row0, BM, src);
    const T* b[2] = {nullptr, nullptr};
#pragma unroll
    for (int m = 0; m < kB; ++m) b[m] = gemm_expert_weights<T, TABLE>(L, m, tile.expert);
    __syncthreads();
    const LoadPlan plan = make_plan(p, src, col0);

    float acc[kB][kAcc];
#pragma unroll
    for (int m = 0; m < kB; ++m)
#pragma unroll
      for (int j = 0; j < kAcc; ++j) acc[m][j] = 0.f;

    const int kt = (p.K + kGemmBK - 1) / kGemmBK;
    const int wg = threadIdx.x / 128;
    // Prefetch distance STAGES - 2 with one wgmma group in flight: at the
    // barrier of iteration t every warpgroup has retired the MMAs of t - 2,
    // so slot (t - 2) % STAGES is free for stage t + STAGES - 2.
#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
      if (s < kt) load_stage(p, b, plan, smem + s * kStageBytes, s * kGemmBK);
      cp_async_commit();
    }
    for (int t = 0; t < kt; ++t) {
      cp_async_wait<STAGES - 3>();
      fence_async_shared();
      __syncthreads();
      const int next = t + STAGES - 2;
      if (next < kt) load_stage(p, b, plan, smem + (next % STAGES) * kStageBytes, next * kGemmBK);
      cp_async_commit();
      compute_stage(smem_addr(smem + (t % STAGES) * kStageBytes), wg, acc);
      wgmma_wait<1>();
    }
    wgmma_wait<0>();
    cp_async_wait<0>();

    store_tile(p, acc, wg, row0, col0);
  }
};

template <typename T, typename OutT, int BM, int BN, int STAGES, int LAYOUT, bool DUAL, int TABLE>
__global__ void __launch_bounds__(256, 1) grouped_gemm_sm90_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  grid_dependency_begin();
  GroupedGemmSm90<T, OutT, BM, BN, STAGES, LAYOUT, DUAL, TABLE>::run(L);
#endif
}

}  // namespace tc::moe
