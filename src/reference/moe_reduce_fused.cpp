// Compiled with -ffp-contract=off: every multiply and add rounds exactly as
// written, matching the kernel's __fmul_rn / __fmaf_rn.
#include "tilecraft/reference/moe_reduce_fused.h"

#include <cmath>
#include <cstring>

namespace tilecraft::reference {
namespace {
void store_out(void* out, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(out)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(out)[i] = conv::f32_to_bf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(out)[i] = conv::f32_to_f16(v); break;
    case DType::kF8E4M3: static_cast<uint8_t*>(out)[i] = conv::f32_to_e4m3(v); break;
    default: break;
  }
}
bool valid(int32_t p, int64_t E) { return p >= 0 && p < E; }
}  // namespace

void moe_reduce_fused_rows(const MoeReduceFusedRef& r, int64_t t_begin, int64_t t_end) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t h = 0; h < r.H; ++h) {
      float acc = 0.0f;
      for (int64_t k = 0; k < r.K; ++k) {
        int32_t p = r.pos[t * r.K + k];
        if (!valid(p, r.E)) continue;
        float s = r.weights ? r.weights[t * r.K + k] : 1.0f;
        if (r.x_sf) s = s * r.x_sf[p];
        float xv = float(load_as_double(r.x, r.x_dtype, size_t(p * r.H + h)));
        acc = std::fma(xv, s, acc);
      }
      store_out(r.out, r.out_dtype, t * r.H + h, r.sf ? acc * r.sf[0] : acc);
    }
  }
}

void moe_reduce_fused_f64(const MoeReduceFusedRef& r, double* out, double* err_bound, int64_t t_begin,
                          int64_t t_end) {
  constexpr double kEps = 1.0 / (1 << 24);  // fp32 unit roundoff
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t h = 0; h < r.H; ++h) {
      double acc = 0, mag = 0;
      int64_t terms = 0;
      for (int64_t k = 0; k < r.K; ++k) {
        int32_t p = r.pos[t * r.K + k];
        if (!valid(p, r.E)) continue;
        double s = r.weights ? r.weights[t * r.K + k] : 1.0;
        if (r.x_sf) s *= r.x_sf[p];
        double term = load_as_double(r.x, r.x_dtype, size_t(p * r.H + h)) * s;
        acc += term;
        mag += std::fabs(term);
        ++terms;
      }
      double g = r.sf ? r.sf[0] : 1.0;
      out[t * r.H + h] = acc * g;
      // (terms + 2) roundings of fp32 (scale product, each FMA, global scale).
      err_bound[t * r.H + h] = double(terms + 2) * kEps * (mag * std::fabs(g) + std::fabs(acc * g));
    }
  }
}

}  // namespace tilecraft::reference
