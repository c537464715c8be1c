#pragma once
// Kernel parameters of moe_grouped_gemm, shared verbatim by kernel and host.
namespace tc::moe {

struct GroupedGemmParams {
  const void* a;           // [a_rows, K] activations (row stride lda)
  const int* a_index;      // [M] source row of A for each layout row, -1 = padding (reads zeros); null = identity
  const int* tile_expert;  // [M / BM] expert of each BM-row tile, -1 = unused; null = every tile is expert 0
  const int* num_tiles;    // [1] tiles in use (device-side count); null = all M / BM
  const void* b[2];        // stacked weights (b[1]: the `up` half of a gated pair); unused with a pointer table
  long long b_expert_stride;  // elements between consecutive experts' matrices (stacked)
  const float* row_scale;  // [M] per-row scale applied in the epilogue, or null
  void* c;                 // [M, N] output
  long long lda, ldb, ldc; // row strides in elements; B rows are N (layout NK) or K (layout KN)
  int M, N, K;             // layout rows (a multiple of BM), output columns, reduction length
  int a_rows;              // rows of A: source rows outside [0, a_rows) read zeros
  int num_experts;         // tiles naming an expert outside [0, num_experts) are skipped
  int group_m;             // CTA order: > 0 walks a 1-D grid in groups of group_m row tiles (tile_order.cuh)
  // Warp-specialised kernel only: tiles in its 1-D order (row tiles x column
  // tiles); CTA b computes tiles b, b + gridDim.x, ... (persistent when the
  // grid is smaller than this). Last, so the other kernels' offsets stay put.
  long long tiles_total;
  // Dynamic tile scheduler (persistent=2), or null: [0] the next tile to hand
  // out, [1] CTAs done fetching; the last CTA to finish resets both to 0, so
  // the pair is ready for the next launch that uses it.
  unsigned* sched;
  // mma.sync kernel, split K (SPLIT instantiations only): CTA z covers K
  // columns [z * k_per_split, (z + 1) * k_per_split) and stores its raw fp32
  // accumulators to partial[((z * (1 + gated) + m) * M + row) * N + col]; the
  // reduce kernel sums the k_splits slices in order and applies the epilogue.
  int k_splits, k_per_split;
  float* partial;
  // [M] or null: rows with a negative entry are padding and read zeros for A
  // (as a_index = -1 does), for A in layout order (no a_index): the layer's
  // down projection passes its pos_to_token, so the decode kernel skips them.
  const int* row_token;
  // Decode kernels only (the layer's decode path: a per-row schedule, one
  // expert per row, block_m = 1). a_repeat > 1: layout row r reads A row
  // r / a_repeat (a token's top_k rows from its one row of x). combine > 1:
  // output row t is the sum over j < combine, in order, of row_scale[row] x
  // (A . W_e)[row] for row = t * combine + j (the down projection with the
  // weighted combine fused in; c has M / combine rows). prefetch (combine
  // kernel), != 0: tile_expert, a_index and row_scale were complete before
  // the previous kernel on the stream began, so the CTA reads its first
  // item's slots before waiting on that kernel, and with prefetch > 0 also
  // hands up to this many bytes of each slot's first weights to the L2 (the
  // host keeps the resident CTAs' total within half the L2); 0: nothing
  // before the wait. (In the plain decode kernel the same prefetch made
  // narrow items spill at 80 registers.)
  int a_repeat, combine, prefetch;
  // [M] or null (warp-specialised kernel, 128-row tiles): negative entries
  // mark padding rows, and each tile holds its rows in use first (the
  // mapping's pos_to_token). A consumer warpgroup whose 64-row half starts
  // on padding holds no rows: it skips its MMAs (its zeros are stored as
  // before), so the other half runs alone on the tensor cores.
  const int* tile_fill;
  // [M] or null (warp-specialised kernel with tensor stores, compiled with
  // FILL): negative entries mark padding rows, which are not stored (their
  // outputs keep whatever was there). The same array as tile_fill where
  // both are given.
  const int* store_fill;
  // CTA pairs (CLUSTER = 2) only: != 0 lets a pair whose tiles read the same
  // weights load each weight box once and multicast it into both CTAs;
  // 0: each CTA loads its own boxes (the pair still runs in lockstep).
  int multicast;
  // Bulk decode kernels (grouped_gemv_bulk.cuh) only: stages of the shared
  // memory ring, output columns per piece (one stage), and A-row buffers
  // (2; 1 where there is one output row, so every CTA's range is in it).
  int bulk_stages, bulk_cols, bulk_abufs;
  // Warp-specialised kernel with A and C by TMA, one CTA per cluster (the
  // layer's down projection) only: the weighted combine fused in when
  // comb_sync is set (grouped_gemm_combine.cuh). The producer warpgroup's
  // three idle warps sum each token's rows once they are stored:
  // comb_out[t] = round(sum over k < comb_k, in order, of comb_weights[t, k]
  // * c[comb_pos[t, k]]), slots with a position outside [0, M) skipped (the
  // bits of moe_reduce_fused over c). comb_row_token: [M] token of each
  // layout row, < 0 = padding (the mapping's pos_to_token). comb_sync: launch
  // counters, 0 at launch and left at 0: [0] the combine's work claims, [1]
  // roles done, [2 + b] tile stores done in row tiles [b * comb_group,
  // (b + 1) * comb_group).
  const int* comb_pos;        // [comb_tokens, comb_k]
  const float* comb_weights;  // [comb_tokens, comb_k] or null (weight 1)
  const int* comb_row_token;  // [M]
  void* comb_out;             // [comb_tokens, N], c's type, rows of N elements
  unsigned* comb_sync;
  int comb_tokens, comb_k, comb_group;
  // Decode combine kernel with a settled schedule (prefetch != 0), sm_90:
  // > 0 = the launch's dynamic shared memory, which holds the first item's
  // weight rows of every slot (combine x BN rows of K): they are bulk-copied
  // there before the grid wait. 0 = none.
  int preload;
  // Grouped order (group_m >= 2) with tile_expert: > 0 = a group boundary
  // that falls inside an expert moves back to the expert's first row tile
  // when that is at most this many tiles back (tile_order.cuh), so short
  // experts never straddle two groups; 0 = groups of exactly group_m.
  // Below group_m.
  int group_align;
};

// Shared memory the warp-specialised kernel keeps for its consumers'
// epilogue staging (64 rows x 256 bytes per consumer warpgroup, whatever the
// output type); the host adds it to the launch's dynamic shared memory.
constexpr int kGemmWsStagingBytes = 2 * 64 * 256;

// Per-expert weight base pointers (the race's layout: one tensor per expert),
// carried in the launch's parameter space, so no upload and no host sync.
template <int N>
struct WeightTable {
  const void* ptr[2][N];
};

// The kernel's one parameter: TABLE = 0 (stacked weights) launches with a
// one-entry table.
template <int N>
struct GroupedGemmLaunch {
  GroupedGemmParams p;
  WeightTable<N> table;
};

// A TMA tensor map (CUtensorMap), encoded on the host for one weight matrix
// set: [E][N][K] (layout NK: dims K, N, E) or [E][K][N] (layout KN: dims N, K,
// E), 128-byte swizzle; per-expert weights get one map each with E = 1.
struct alignas(64) TmaDesc {
  unsigned long long word[16];
};

// The warp-specialised kernel's parameter when it loads weights by TMA: the
// maps live in the launch's parameter space (__grid_constant__), where the
// TMA unit reads them, so no upload and nothing to invalidate. N = 1 for
// stacked weights (the expert is a coordinate), else one map per expert.
// a_map: A itself ([a_rows][K], dims K, a_rows, 1), used when A rows are read
// in layout order (no a_index: the layer's down projection). c_map: the
// output ([M][N], dims N, M, 1, boxes of 64 rows x 128 bytes), used when the
// tiles are stored by TMA (TMA_C).
template <int N>
struct GroupedGemmTmaLaunch {
  GroupedGemmParams p;
  TmaDesc a_map;
  TmaDesc c_map;
  TmaDesc map[2][N];
};

// At most this many experts by pointer get their maps in the launch
// parameters (2 x 64 x 128 bytes = 16 KB; 128 gated experts would take the
// whole 32 KB the parameters hold).
constexpr int kParamMaps = 64;

// More experts by pointer than kParamMaps: the maps lie in global memory,
// maps[m][e] (m: 0 = the weights, 1 = `up`), written by build_tma_maps_kernel
// (tma_maps.cuh) on the same stream before the launch; the kernel fences
// each map it reads there (fence.proxy.tensormap) before its first copy.
struct GroupedGemmTmaGlobalLaunch {
  GroupedGemmParams p;
  TmaDesc a_map;
  TmaDesc c_map;
  const TmaDesc* maps[2];
};

template <bool TMA, int N>
struct GroupedGemmLaunchOf {
  using type = GroupedGemmLaunch<N>;
};
template <int N, bool GLOBAL = (N > kParamMaps)>
struct GroupedGemmTmaLaunchOf {
  using type = GroupedGemmTmaLaunch<N>;
};
template <int N>
struct GroupedGemmTmaLaunchOf<N, true> {
  using type = GroupedGemmTmaGlobalLaunch;
};
template <int N>
struct GroupedGemmLaunchOf<true, N> {
  using type = typename GroupedGemmTmaLaunchOf<N>::type;
};

}  // namespace tc::moe
