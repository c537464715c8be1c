#pragma once
// The grouped GEMMs' 1-D tile order (group_m > 0): groups of row tiles, each
// group's tiles walked row tile fastest, so the CTAs resident at one time
// share a few A row blocks and B column blocks in L2. Also compiled by the
// host, for its CPU test (tests/moe_tile_order_test.cpp).
#include "moe/grouped_gemm_params.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TC_TILE_ORDER_FN __host__ __device__ __forceinline__
#else
#define TC_TILE_ORDER_FN inline
#endif

namespace tc::moe {

TC_TILE_ORDER_FN int tile_order_load(const int* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// Where group k of the expert-aligned order begins (p.group_align > 0, with
// p.tile_expert): row tile k x group_m, moved back to the first row tile of
// its expert when that is at most group_align tiles back; `tiles` past the
// end. A nominal boundary inside a short expert splits it between two
// groups, which run a wave apart, and the expert's weights then stream from
// DRAM twice; moved back, the expert's tiles share one group (and its
// weights one pass). Long experts (starts further back) keep the nominal
// boundary. group_align < group_m keeps the boundaries increasing.
// (b - d >= 0 for every tile looked at: b >= group_m > group_align.)
// group_align is at most kMaxGroupAlign (the five scalars below).
constexpr int kMaxGroupAlign = 3;
TC_TILE_ORDER_FN long long gemm_group_bound(const GroupedGemmParams& p, long long k, int tiles) {
  const long long b = k * p.group_m;
  if (b >= tiles) return tiles;
  if (b == 0) return 0;
  // Row tiles b - 4 .. b, loaded independently (one memory round trip, not
  // one per tile looked at); b - 3 and b - 4 only where group_align reaches them.
  const int* t = p.tile_expert + b;
  const int ga = p.group_align;
  const int e0 = tile_order_load(t), e1 = tile_order_load(t - 1), e2 = tile_order_load(t - 2);
  const int e3 = ga >= 2 ? tile_order_load(t - 3) : e0, e4 = ga >= 3 ? tile_order_load(t - 4) : e0;
  if (e1 != e0) return b;
  if (e2 != e0) return b - 1;
  if (e3 != e0) return b - 2;
  if (e4 != e0) return b - 3;
  return b;
}

// Tile `idx` of the 1-D grouped order over `tiles` row tiles in use and
// column tiles of bn: (row tile tm, column tile tn). False past the tiles in
// use (or the tail of a short fixed group). ALIGN: the kernel reads
// group_align (the warp-specialised kernel with TMA weights, which decodes
// the order once per unit); other kernels compile fixed groups only.
template <bool ALIGN = false>
TC_TILE_ORDER_FN bool gemm_group_tile(const GroupedGemmParams& p, long long idx, int tiles, int bn, int& tm,
                                      int& tn) {
  const long long tiles_n = (p.N + bn - 1) / bn;
  if (ALIGN && p.group_align > 0 && p.tile_expert) {
    // Groups [lo, hi) of varying height: the tiles before group k number
    // bound(k) x tiles_n, so idx's row-tile position q lies in group q / G or
    // the next (each bound is at most group_align below its nominal point).
    const long long q = idx / tiles_n;
    if (q >= tiles) return false;
    const long long k = q / p.group_m;
    long long lo = gemm_group_bound(p, k, tiles), hi = gemm_group_bound(p, k + 1, tiles);
    if (q >= hi) lo = hi, hi = gemm_group_bound(p, k + 2, tiles);
    const long long r = idx - lo * tiles_n, rows = hi - lo;
    tm = int(lo + r % rows), tn = int(r / rows);
    return true;
  }
  const long long per_group = (long long)p.group_m * tiles_n;
  const long long g = idx / per_group, r = idx - g * per_group;
  const long long first = g * p.group_m;
  if (first >= tiles) return false;
  const long long rows = first + p.group_m <= tiles ? p.group_m : tiles - first;
  if (r >= rows * tiles_n) return false;
  tm = int(first + r % rows), tn = int(r / rows);
  return true;
}

}  // namespace tc::moe

#undef TC_TILE_ORDER_FN
