#pragma once
// CPU golden for moe_grouped_gemm: per layout row, the expert of its tile,
// fp32 dot products accumulated in k order, then the epilogue
// (silu(g) * u when gated, times the row scale), rounded once to the output
// dtype. Rows of unused tiles are left untouched.
#include <cstdint>
#include <functional>

#include "tilecraft/dtype.h"

namespace tilecraft::reference {

struct MoeGroupedGemmRef {
  // Row `src` of A as fp32 (K values).
  std::function<void(int64_t src, float* row)> load_a;
  // Expert e's matrix (which = 0: w, 1: w_up) as fp32 in [N, K] order.
  std::function<void(int64_t e, int which, float* nk)> load_w;
  bool gated = false;
  const int32_t* a_index;          // [M] or null
  const int32_t* row_token;        // [M] or null: a negative entry makes the row padding (zeros)
  const int32_t* tile_expert;      // [M / block_m] or null
  const int32_t* num_tiles;        // [1] or null
  const float* row_scale;          // [M] or null
  const uint8_t* row_mask;         // [M] or null: compute only rows with a nonzero mask
  void* out; DType out_dtype;      // [M, N]
  int64_t M, N, K, E, a_rows, block_m;
};

// The expert computing layout row `row`, or -1 when its tile is unused.
int64_t grouped_gemm_row_expert(const MoeGroupedGemmRef& r, int64_t row);
// The A row that layout row `row` reads, or -1 (zeros).
int64_t grouped_gemm_source_row(const MoeGroupedGemmRef& r, int64_t row);

void moe_grouped_gemm(const MoeGroupedGemmRef& r);

// float64 value of one output before its cast, from fp32 inputs (x: K values;
// w, wu: the output column's K weights; wu null when not gated), and a bound on
// the error an fp32 evaluation in any summation order may make.
double grouped_gemm_value_f64(const float* x, const float* w, const float* wu, int64_t K, double scale,
                              double* err_bound);

// Loads expert matrices from memory: `bases[e]` is expert e's matrix, [N, K]
// or (kn) [K, N], in dtype `t`; returns a load_w for MoeGroupedGemmRef.
std::function<void(int64_t, int, float*)> weights_from_memory(const void* const* w, const void* const* w_up, DType t,
                                                               bool kn, int64_t N, int64_t K);

}  // namespace tilecraft::reference
