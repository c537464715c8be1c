// Compiled with -ffp-contract=off: every multiply and add rounds exactly as
// written, matching the kernel's __fmul_rn / __fmaf_rn.
#include "tilecraft/reference/moe_reduce_fused.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tilecraft/reference/fma_chain.h"

namespace tilecraft::reference {
namespace {
bool valid(int32_t p, int64_t E) { return p >= 0 && p < E; }
}  // namespace

void moe_reduce_fused_rows(const MoeReduceFusedRef& r, int64_t t_begin, int64_t t_end) {
  // A token's H sums advance one slot at a time (each element's FMAs still in
  // k order): whole rows converted and accumulated, one dtype dispatch a row.
  std::vector<float> acc(size_t(r.H)), xrow(size_t(r.H));
  for (int64_t t = t_begin; t < t_end; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k = 0; k < r.K; ++k) {
      int32_t p = r.pos[t * r.K + k];
      if (!valid(p, r.E)) continue;
      float s = r.weights ? r.weights[t * r.K + k] : 1.0f;
      if (r.x_sf) s = s * r.x_sf[p];
      load_row_f32(r.x, r.x_dtype, size_t(p * r.H), r.H, xrow.data());
      fma_axpy(xrow.data(), s, acc.data(), r.H);
    }
    if (r.sf)
      for (float& a : acc) a = a * r.sf[0];
    store_row_f32(r.out, r.out_dtype, size_t(t * r.H), r.H, acc.data());
  }
}

void moe_reduce_fused_f64(const MoeReduceFusedRef& r, double* out, double* err_bound, int64_t t_begin,
                          int64_t t_end) {
  constexpr double kEps = 1.0 / (1 << 24);  // fp32 unit roundoff
  std::vector<double> acc(size_t(r.H)), mag(size_t(r.H));
  std::vector<float> xrow(size_t(r.H));
  for (int64_t t = t_begin; t < t_end; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    int64_t terms = 0;
    for (int64_t k = 0; k < r.K; ++k) {
      int32_t p = r.pos[t * r.K + k];
      if (!valid(p, r.E)) continue;
      double s = r.weights ? r.weights[t * r.K + k] : 1.0;
      if (r.x_sf) s *= r.x_sf[p];
      load_row_f32(r.x, r.x_dtype, size_t(p * r.H), r.H, xrow.data());
      for (int64_t h = 0; h < r.H; ++h) {
        const double term = double(xrow[size_t(h)]) * s;
        acc[size_t(h)] += term;
        mag[size_t(h)] += std::fabs(term);
      }
      ++terms;
    }
    const double g = r.sf ? r.sf[0] : 1.0;
    const int64_t row = (t - t_begin) * r.H;
    for (int64_t h = 0; h < r.H; ++h) {
      out[row + h] = acc[size_t(h)] * g;
      // (terms + 2) roundings of fp32 (scale product, each FMA, global scale).
      err_bound[row + h] = double(terms + 2) * kEps * (mag[size_t(h)] * std::fabs(g) + std::fabs(acc[size_t(h)] * g));
    }
  }
}

}  // namespace tilecraft::reference
