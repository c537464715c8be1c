#pragma once
// CPU golden for moe_reduce_fused: the definition, written plainly.
#include <cstdint>

#include "tilecraft/dtype.h"

namespace tilecraft::reference {

struct MoeReduceFusedRef {
  const void* x; DType x_dtype;
  const int32_t* pos;
  const float* weights;  // null: coefficient 1
  const float* x_sf;     // null: none
  const float* sf;       // null: none
  void* out; DType out_dtype;
  int64_t T, K, H, E;
};

// Rows [t_begin, t_end) of the output, fp32 FMAs in k order, RNE output cast.
// Positions < 0 or >= E are skipped.
void moe_reduce_fused_rows(const MoeReduceFusedRef& r, int64_t t_begin, int64_t t_end);

// float64 evaluation of the same sum (no output cast) and a bound on the fp32
// accumulation error of each element, for checking goldens independently:
// rows [t_begin, t_end) into out / err_bound from their first element (row
// t_begin at 0), so a caller needs buffers for those rows only.
void moe_reduce_fused_f64(const MoeReduceFusedRef& r, double* out, double* err_bound, int64_t t_begin,
                          int64_t t_end);

}  // namespace tilecraft::reference
