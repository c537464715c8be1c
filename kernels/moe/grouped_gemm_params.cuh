#pragma once
// Kernel parameters of moe_grouped_gemm, shared verbatim by kernel and host.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TC_HOST_DEVICE __host__ __device__
#else
#define TC_HOST_DEVICE
#endif

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
  int raster_group;        // 0: row tiles fastest; G > 0: G row tiles x all column tiles per group (L2 reuse of A)
};

// The (row tile, column tile) a CTA computes, from its linear index over a
// num_m x num_n grid. group 0 walks row tiles fastest (consecutive CTAs share
// a weight tile); group G visits G row tiles across every column tile before
// moving on, so those rows of A stay in L2 while the columns sweep past.
// A bijection for any sizes (tested on the host).
TC_HOST_DEVICE inline void gemm_tile_coords(int linear, int num_m, int num_n, int group, int* m, int* n) {
  if (group <= 0) {
    *m = linear % num_m;
    *n = linear / num_m;
    return;
  }
  const int per_group = group * num_n;
  const int first_m = (linear / per_group) * group;
  const int rows = num_m - first_m < group ? num_m - first_m : group;
  const int within = linear % per_group;
  *m = first_m + within % rows;
  *n = within / rows;
}

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

}  // namespace tc::moe
