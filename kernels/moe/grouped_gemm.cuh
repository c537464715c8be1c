#pragma once
// moe_grouped_gemm, mma.sync path (sm_80+): C[r, :] = epilogue(A[src(r), :] . W_e)
// for every layout row r, where e is the expert owning r's BM-row tile.
//
// One CTA computes a BM x BN output tile (BM x 2BN when DUAL: the gate and up
// columns of the same outputs, combined as silu(gate) * up). K is walked in
// 64-wide steps through a STAGES-deep cp.async ring in shared memory; each
// warp owns a (BM / WARPS_M) x (BN / WARPS_N) sub-tile and issues
// m16n8k16 MMAs from ldmatrix fragments. A rows come through `a_index`, so the
// gather of tokens into expert-major order happens in the load and no
// expanded copy of the activations exists. B is either [N, K] per expert
// (LAYOUT 0, nn.Linear) or [K, N] per expert (LAYOUT 1, the race's layout,
// read with ldmatrix.trans): both are consumed where they lie.
//
// VEC: 16-byte cp.async loads (K, N, strides and bases multiples of 8
// elements); otherwise element loads with bounds, for odd shapes.
#include "moe/grouped_gemm_params.cuh"
#include "moe/tile_order.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/mma.cuh"
#include "tile/target.cuh"

namespace tc::moe {

constexpr int kGemmBK = 64;  // K per pipeline stage: one 128-byte shared row of 16-bit values

// silu(g) = g * sigmoid(g) with no slow path. g / (1 + expf(-g)) took an
// IEEE division, whose fast path gives way to a subroutine for extreme
// divisors (1 + exp(-g) huge or infinite, g far below zero): on unit-normal
// A and W the gated GEMMs ran 30-37% over a plain GEMM of the same FLOPs,
// now 1-4%; on small values the layer's gate/up gained too (Qwen3-30B
// T = 4096: 416 -> 372 us; H200, session 39). Here the divisor is 1 + e,
// e = exp(-|g|) in (0, 1], where the approximate division errs by ~2 ulps
// (far below the 16-bit output's rounding); for g < 0 sigmoid(g) =
// e / (1 + e), so tiny results stay tiny instead of flushing to zero.
__device__ __forceinline__ float gemm_silu(float g) {
  const float e = expf(-fabsf(g));
  const float r = __fdividef(1.0f, 1.0f + e);
  return g * (g >= 0.0f ? r : e * r);
}

// Output columns col, col + 1 of `row` (col even); pairs as one store when the
// row layout allows (VEC: N and the row stride multiples of 8).
template <typename OutT, bool VEC>
__device__ __forceinline__ void gemm_store_pair(const GroupedGemmParams& p, int row, int col, float v0, float v1) {
  OutT* c = static_cast<OutT*>(p.c) + (long long)row * p.ldc + col;
  const bool pair = col + 1 < p.N;
  if constexpr (VEC) {
    if (pair) {
      if constexpr (sizeof(OutT) == 2) {
        const OutT o[2] = {from_float<OutT>(v0), from_float<OutT>(v1)};
        *reinterpret_cast<unsigned*>(c) = *reinterpret_cast<const unsigned*>(o);
      } else {
        *reinterpret_cast<float2*>(c) = make_float2(v0, v1);
      }
      return;
    }
  }
  if (col < p.N) c[0] = from_float<OutT>(v0);
  if (pair) c[1] = from_float<OutT>(v1);
}

// 8 consecutive 16-bit elements (fewer when `left` < 8; none when !ok) -> 16
// shared bytes: one cp.async (VEC: left is then a multiple of 8), or element
// loads with bounds.
template <bool VEC>
__device__ __forceinline__ void gemm_copy_chunk(char* dst, const void* g, bool ok, int left) {
  if constexpr (VEC) {
    cp_async_16(dst, g, ok && left > 0);
  } else {
    unsigned short v[8];
    const unsigned short* gs = static_cast<const unsigned short*>(g);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = ok && j < left ? gs[j] : 0;
    uint4 w;
    w.x = v[0] | unsigned(v[1]) << 16;
    w.y = v[2] | unsigned(v[3]) << 16;
    w.z = v[4] | unsigned(v[5]) << 16;
    w.w = v[6] | unsigned(v[7]) << 16;
    *reinterpret_cast<uint4*>(dst) = w;
  }
}

// Source row of A for each of a tile's `rows` layout rows (-1: zeros), into shared memory.
__device__ __forceinline__ void gemm_tile_sources(const GroupedGemmParams& p, int row0, int rows, int* src) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const int row = row0 + r;
    int s = row < p.M ? (p.a_index ? p.a_index[row] : row) : -1;
    if (s >= 0 && p.row_token && p.row_token[row] < 0) s = -1;
    src[r] = s >= 0 && s < p.a_rows ? s : -1;
  }
}

// The output tile (row tile tm, column tile tn) this CTA computes, of
// `tiles` row tiles in use. group_m = 0: a 2-D grid, x = row tile, y = column
// tile (resident CTAs share one B column block but each streams its own A
// rows, so A is read from DRAM once per column tile). group_m > 0: a 1-D grid
// in the grouped order of tile_order.cuh.
// False: nothing to do (past the tiles in use, or the tail of a short group).
__device__ __forceinline__ bool gemm_tile_of(const GroupedGemmParams& p, int tiles, int bn, int& tm, int& tn) {
  if (p.group_m <= 0) {
    tm = blockIdx.x, tn = blockIdx.y;
    return tm < tiles;
  }
  return gemm_group_tile(p, blockIdx.x, tiles, bn, tm, tn);
}

// This CTA's output tile and its expert; false when it has none (past the
// tiles in use, the tail of a short group, or a tile of no expert).
struct GemmTile {
  int row0, col0, expert;
};
__device__ __forceinline__ bool gemm_tile_owned(const GroupedGemmParams& p, int bm, int bn, GemmTile& t) {
  const int tiles = p.num_tiles ? *p.num_tiles : (p.M + bm - 1) / bm;
  int tm, tn;
  if (!gemm_tile_of(p, tiles, bn, tm, tn)) return false;
  t.expert = p.tile_expert ? p.tile_expert[tm] : 0;
  if (t.expert < 0 || t.expert >= p.num_experts) return false;
  t.row0 = tm * bm, t.col0 = tn * bn;
  return true;
}

// Tile `idx` of a 1-D walk over all tiles (group_m = 0: row tile fastest,
// like the 2-D grid) and its expert; false when it has none.
template <bool ALIGN = false>
__device__ __forceinline__ bool gemm_tile_at(const GroupedGemmParams& p, long long idx, int tiles, int bm, int bn,
                                             GemmTile& t) {
  int tm, tn;
  if (p.group_m > 0) {
    if (!gemm_group_tile<ALIGN>(p, idx, tiles, bn, tm, tn)) return false;
  } else {
    const long long grid_m = (p.M + bm - 1) / bm;
    tm = int(idx % grid_m), tn = int(idx / grid_m);
    if (tm >= tiles) return false;
  }
  t.expert = p.tile_expert ? p.tile_expert[tm] : 0;
  if (t.expert < 0 || t.expert >= p.num_experts) return false;
  t.row0 = tm * bm, t.col0 = tn * bn;
  return true;
}

// Base of expert e's matrix m (0: w, 1: w_up): from the launch's pointer
// table (TABLE > 0) or the stacked tensor.
template <typename T, int TABLE>
__device__ __forceinline__ const T* gemm_expert_weights(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, int m, int e) {
  if constexpr (TABLE > 0) return static_cast<const T*>(L.table.ptr[m][e]);
  else return static_cast<const T*>(L.p.b[m]) + (long long)e * L.p.b_expert_stride;
}

template <typename T, typename OutT, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, int LAYOUT, bool DUAL,
          bool VEC, int TABLE, bool SPLIT = false>
struct GroupedGemm {
  static constexpr int kThreads = WARPS_M * WARPS_N * Target::kWarpSize;
  static constexpr int kB = DUAL ? 2 : 1;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr int kABytes = BM * kGemmBK * 2;  // one stage of A
  static constexpr int kBBytes = BN * kGemmBK * 2;  // one stage of one B matrix
  static constexpr int kStageBytes = kABytes + kB * kBBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes + BM * 4;
  static constexpr int kBRowBytes = LAYOUT == 0 ? kGemmBK * 2 : BN * 2;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: multiples of 16 rows and 16 columns");
  static_assert(BN * 2 >= 128, "BN >= 64: the swizzle needs 8 chunks per shared row");
  static_assert(sizeof(T) == 2, "16-bit inputs");

  struct Ctx {
    const GroupedGemmParams& p;
    const T* b[2];
    const int* src;  // [BM] source rows in shared memory
    int row0, col0;
  };

  // Stage `s` <- K columns [k0, k0 + 64) of the A rows and B columns of this
  // tile; columns from `kend` on read zeros (the K edge, or this CTA's split).
  static __device__ __forceinline__ void load_stage(const Ctx& x, char* stage, int k0, int kend) {
    const GroupedGemmParams& p = x.p;
    const int tid = threadIdx.x;
    const T* a = static_cast<const T*>(p.a);
    // A: BM rows x 8 chunks of 8 elements.
    for (int i = tid; i < BM * 8; i += kThreads) {
      const int r = i >> 3, ch = i & 7, k = k0 + ch * 8;
      const int src = x.src[r];
      char* dst = stage + swizzle(r, ch, kGemmBK * 2);
      const T* g = a + (long long)(src < 0 ? 0 : src) * p.lda + k;
      copy_chunk(dst, g, src >= 0, kend - k);
    }
    // B: per matrix, BN x 64 (NK) or 64 x BN (KN).
#pragma unroll
    for (int m = 0; m < kB; ++m) {
      char* bs = stage + kABytes + m * kBBytes;
      constexpr int kChunksPerRow = kBRowBytes / 16;
      constexpr int kRows = LAYOUT == 0 ? BN : kGemmBK;
      for (int i = tid; i < kRows * kChunksPerRow; i += kThreads) {
        const int r = i / kChunksPerRow, ch = i % kChunksPerRow;
        char* dst = bs + swizzle(r, ch, kBRowBytes);
        if constexpr (LAYOUT == 0) {  // row r = output column col0 + r; chunk along K
          const int n = x.col0 + r, k = k0 + ch * 8;
          copy_chunk(dst, x.b[m] + (long long)(n < p.N ? n : 0) * p.ldb + k, n < p.N, kend - k);
        } else {  // row r = K index k0 + r; chunk along N
          const int k = k0 + r, n = x.col0 + ch * 8;
          copy_chunk(dst, x.b[m] + (long long)(k < kend ? k : 0) * p.ldb + n, k < kend, p.N - n);
        }
      }
    }
  }

  static __device__ __forceinline__ void copy_chunk(char* dst, const T* g, bool row_ok, int left) {
    gemm_copy_chunk<VEC>(dst, g, row_ok, left);
  }

  static __device__ __forceinline__ void compute_stage(const char* stage, float (&acc)[kB][MI][NI][4], int wm, int wn,
                                                       int lane) {
#pragma unroll
    for (int ks = 0; ks < kGemmBK / 16; ++ks) {
      unsigned af[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int r = wm * WM + mi * 16 + (lane & 15);
        ldmatrix_x4(af[mi], stage + swizzle(r, ks * 2 + (lane >> 4), kGemmBK * 2));
      }
#pragma unroll
      for (int m = 0; m < kB; ++m) {
        const char* bs = stage + kABytes + m * kBBytes;
        unsigned bf[NI][2];
#pragma unroll
        for (int np = 0; np < NI / 2; ++np) {
          unsigned r4[4];
          if constexpr (LAYOUT == 0) {
            const int n = wn * WN + np * 16 + (lane & 7) + ((lane >> 4) << 3);
            ldmatrix_x4(r4, bs + swizzle(n, ks * 2 + ((lane >> 3) & 1), kBRowBytes));
          } else {
            const int k = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
            ldmatrix_x4_trans(r4, bs + swizzle(k, (wn * WN + np * 16) / 8 + (lane >> 4), kBRowBytes));
          }
          bf[2 * np][0] = r4[0];
          bf[2 * np][1] = r4[1];
          bf[2 * np + 1][0] = r4[2];
          bf[2 * np + 1][1] = r4[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) mma_16816<T>(acc[m][mi][ni], af[mi], bf[ni]);
      }
    }
  }

  // SPLIT: this CTA's raw accumulators (every matrix) into its K slice.
  static __device__ __forceinline__ void store_partial(const GroupedGemmParams& p, const float (&acc)[kB][MI][NI][4],
                                                       int wm, int wn, int lane, int row0, int col0) {
#pragma unroll
    for (int m = 0; m < kB; ++m) {
      float* slice = p.partial + (long long)(blockIdx.z * kB + m) * p.M * p.N;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + wm * WM + mi * 16 + (lane >> 2) + h * 8;
          if (row >= p.M) continue;
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int col = col0 + wn * WN + ni * 8 + (lane & 3) * 2;
            if (col < p.N) slice[(long long)row * p.N + col] = acc[m][mi][ni][2 * h];
            if (col + 1 < p.N) slice[(long long)row * p.N + col + 1] = acc[m][mi][ni][2 * h + 1];
          }
        }
    }
  }

  // group_m = 0: the 2-D grid, one tile per CTA. group_m > 0: CTA b takes
  // tiles b, b + gridDim.x, ... of the grouped order, whose tiles in use come
  // first; at decode the host launches about as many CTAs as there can be
  // tiles in use, not one per tile of the capacity (DeepSeek-V3 T=1: ~13K
  // CTAs for 448 tiles, two resident per SM, each exiting at once).
  static __device__ __forceinline__ void run(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L) {
    const GroupedGemmParams& p = L.p;
    extern __shared__ __align__(128) char smem[];
    GemmTile tile;
    // The 512-entry pointer table (> 64 per-expert tensors) spills 8 bytes
    // in the loop: it keeps one tile per CTA (the host does not shrink its grid).
    if (p.group_m <= 0 || TABLE > 64) {
      if (gemm_tile_owned(p, BM, BN, tile)) run_tile(L, tile, smem);
      return;
    }
    const int tiles = p.num_tiles ? *p.num_tiles : (p.M + BM - 1) / BM;
    const long long tiles_n = (p.N + BN - 1) / BN, group = (long long)p.group_m * tiles_n;
    const long long live = min(p.tiles_total, (tiles + p.group_m - 1) / p.group_m * group);
    for (long long idx = blockIdx.x; idx < live; idx += gridDim.x) {
      if (!gemm_tile_at(p, idx, tiles, BM, BN, tile)) continue;
      run_tile(L, tile, smem);
      __syncthreads();  // every thread is done with the ring and src before the next tile's loads
    }
  }

  static __device__ __forceinline__ void run_tile(const GroupedGemmLaunch<TABLE ? TABLE : 1>& L, const GemmTile& tile,
                                                  char* smem) {
    const GroupedGemmParams& p = L.p;
    const int row0 = tile.row0, col0 = tile.col0;

    int* src = reinterpret_cast<int*>(smem + STAGES * kStageBytes);
    gemm_tile_sources(p, row0, BM, src);
    Ctx x{p, {nullptr, nullptr}, src, row0, col0};
#pragma unroll
    for (int m = 0; m < kB; ++m) x.b[m] = gemm_expert_weights<T, TABLE>(L, m, tile.expert);
    __syncthreads();

    float acc[kB][MI][NI][4];
#pragma unroll
    for (int m = 0; m < kB; ++m)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[m][mi][ni][j] = 0.f;

    const int kbeg = SPLIT ? int(blockIdx.z) * p.k_per_split : 0;
    const int kend = SPLIT ? min(p.K, kbeg + p.k_per_split) : p.K;
    const int kt = kend > kbeg ? (kend - kbeg + kGemmBK - 1) / kGemmBK : 0;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < kt) load_stage(x, smem + s * kStageBytes, kbeg + s * kGemmBK, kend);
      cp_async_commit();
    }
    const int warp = threadIdx.x / Target::kWarpSize, lane = threadIdx.x % Target::kWarpSize;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    for (int t = 0; t < kt; ++t) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // stage t landed for all threads; stage t-1 is free
      const int next = t + STAGES - 1;
      if (next < kt) load_stage(x, smem + (next % STAGES) * kStageBytes, kbeg + next * kGemmBK, kend);
      cp_async_commit();
      compute_stage(smem + (t % STAGES) * kStageBytes, acc, wm, wn, lane);
    }
    cp_async_wait<0>();
    if constexpr (SPLIT) {
      store_partial(p, acc, wm, wn, lane, row0, col0);
      return;
    }

    // Epilogue: fragment (mi, ni) holds rows +lane/4 and +lane/4+8, columns +2*(lane%4)..+1.
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * WM + mi * 16 + (lane >> 2) + h * 8;
        const int row = row0 + r;
        if (row >= p.M) continue;
        const float scale = p.row_scale ? p.row_scale[row] : 1.0f;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int col = col0 + wn * WN + ni * 8 + (lane & 3) * 2;
          float v0 = acc[0][mi][ni][2 * h], v1 = acc[0][mi][ni][2 * h + 1];
          if constexpr (DUAL) {
            v0 = gemm_silu(v0) * acc[kB - 1][mi][ni][2 * h];
            v1 = gemm_silu(v1) * acc[kB - 1][mi][ni][2 * h + 1];
          }
          gemm_store_pair<OutT, VEC>(p, row, col, v0 * scale, v1 * scale);
        }
      }
  }
};

template <typename T, typename OutT, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, int LAYOUT, bool DUAL,
          bool VEC, int TABLE>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    grouped_gemm_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  grid_dependency_begin();
  GroupedGemm<T, OutT, BM, BN, WARPS_M, WARPS_N, STAGES, LAYOUT, DUAL, VEC, TABLE>::run(L);
}

// Split K (decode: too few tiles to fill the GPU): grid z = p.k_splits.
template <typename T, typename OutT, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, int LAYOUT, bool DUAL,
          bool VEC, int TABLE>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    grouped_gemm_split_kernel(const GroupedGemmLaunch<TABLE ? TABLE : 1> L) {
  grid_dependency_begin();
  GroupedGemm<T, OutT, BM, BN, WARPS_M, WARPS_N, STAGES, LAYOUT, DUAL, VEC, TABLE, true>::run(L);
}

// Sums the k_splits slices of each output pair in split order (the same bits
// on every run), then the epilogue: silu(gate) * up when DUAL, row scale,
// store. Rows of tiles past num_tiles or of no expert are not written.
template <typename OutT, int BM, bool DUAL, bool VEC>
__global__ void grouped_gemm_split_reduce_kernel(const GroupedGemmParams p) {
  grid_dependency_begin();
  const int pairs = (p.N + 1) / 2;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)p.M * pairs) return;
  const int row = int(i / pairs), col = int(i % pairs) * 2;
  const int tm = row / BM;
  const int tiles = p.num_tiles ? *p.num_tiles : (p.M + BM - 1) / BM;
  if (tm >= tiles) return;
  const int e = p.tile_expert ? p.tile_expert[tm] : 0;
  if (e < 0 || e >= p.num_experts) return;
  constexpr int kB = DUAL ? 2 : 1;
  const long long slice = (long long)p.M * p.N, at = (long long)row * p.N + col;
  float v[kB][2] = {};
  for (int z = 0; z < p.k_splits; ++z)
#pragma unroll
    for (int m = 0; m < kB; ++m) {
      const float* s = p.partial + (z * kB + m) * slice + at;
      v[m][0] += s[0];
      if (col + 1 < p.N) v[m][1] += s[1];
    }
  float v0 = v[0][0], v1 = v[0][1];
  if constexpr (DUAL) v0 = gemm_silu(v0) * v[1][0], v1 = gemm_silu(v1) * v[1][1];
  const float scale = p.row_scale ? p.row_scale[row] : 1.0f;
  gemm_store_pair<OutT, VEC>(p, row, col, v0 * scale, v1 * scale);
}

}  // namespace tc::moe
