// Compiled with -ffp-contract=off (see CMakeLists.txt): products and sums
// round as written.
#include "tilecraft/reference/moe_grouped_gemm.h"

#include <cfloat>
#include <cmath>
#include <vector>

#include "tilecraft/parallel.h"
#include "tilecraft/reference/fma_chain.h"

namespace tilecraft::reference {
namespace {

void store(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = conv::f32_to_bf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = conv::f32_to_f16(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

}  // namespace

int64_t grouped_gemm_row_expert(const MoeGroupedGemmRef& r, int64_t row) {
  const int64_t tile = row / r.block_m;
  const int64_t tiles = r.num_tiles ? *r.num_tiles : (r.M + r.block_m - 1) / r.block_m;
  if (tile >= tiles) return -1;
  const int64_t e = r.tile_expert ? r.tile_expert[tile] : 0;
  return e >= 0 && e < r.E ? e : -1;
}

int64_t grouped_gemm_source_row(const MoeGroupedGemmRef& r, int64_t row) {
  const int64_t s = r.a_index ? r.a_index[row] : row;
  if (r.row_token && r.row_token[row] < 0) return -1;
  return s >= 0 && s < r.a_rows ? s : -1;
}

void moe_grouped_gemm(const MoeGroupedGemmRef& r) {
  // Expert by expert, so each weight matrix is loaded once.
  std::vector<std::vector<int64_t>> rows(size_t(r.E));
  for (int64_t row = 0; row < r.M; ++row) {
    if (r.row_mask && !r.row_mask[row]) continue;
    const int64_t e = grouped_gemm_row_expert(r, row);
    if (e >= 0) rows[size_t(e)].push_back(row);
  }
  std::vector<float> w, wu;
  for (int64_t e = 0; e < r.E; ++e) {
    const auto& mine = rows[size_t(e)];
    if (mine.empty()) continue;
    w.resize(size_t(r.N * r.K));
    r.load_w(e, 0, w.data());
    if (r.gated) {
      wu.resize(size_t(r.N * r.K));
      r.load_w(e, 1, wu.data());
    }
    parallel_for(int64_t(mine.size()), r.N * r.K * (r.gated ? 2 : 1), [&](int64_t b, int64_t end) {
      std::vector<float> x(size_t(r.K)), g(size_t(r.N)), u(size_t(r.gated ? r.N : 0));
      for (int64_t i = b; i < end; ++i) {
        const int64_t row = mine[size_t(i)], src = grouped_gemm_source_row(r, row);
        const float scale = r.row_scale ? r.row_scale[row] : 1.0f;
        if (src < 0) {  // padding: a zero row, whose every output is 0 * scale
          for (int64_t n = 0; n < r.N; ++n) store(r.out, r.out_dtype, row * r.N + n, 0.f * scale);
          continue;
        }
        r.load_a(src, x.data());
        fma_dots(x.data(), w.data(), r.N, r.K, g.data());
        if (r.gated) fma_dots(x.data(), wu.data(), r.N, r.K, u.data());
        for (int64_t n = 0; n < r.N; ++n) {
          const float gn = g[size_t(n)];
          const float v = r.gated ? gn / (1.0f + std::exp(-gn)) * u[size_t(n)] : gn;
          store(r.out, r.out_dtype, row * r.N + n, v * scale);
        }
      }
    });
  }
}

double grouped_gemm_value_f64(const float* x, const float* w, const float* wu, int64_t K, double scale,
                              double* err_bound) {
  auto dot = [&](const float* m, double* abs_sum) {
    double s = 0, a = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double p = double(x[k]) * double(m[k]);
      s += p;
      a += std::fabs(p);
    }
    *abs_sum = a;
    return s;
  };
  // fp32 accumulation of K terms in any order: |err| <= K * eps * sum|terms|.
  const double eps = double(FLT_EPSILON) / 2, kk = double(K) * eps;
  double ga = 0, ua = 0;
  const double g = dot(w, &ga);
  if (!wu) {
    *err_bound = std::fabs(scale) * (kk * ga + eps * std::fabs(g));
    return g * scale;
  }
  const double u = dot(wu, &ua);
  const double sig = 1.0 / (1.0 + std::exp(-g));
  const double v = g * sig * u;
  // silu' is bounded by 1.1; the fp32 epilogue (exp, divide, multiplies) adds
  // a few roundings of the result.
  *err_bound =
      std::fabs(scale) * (1.1 * kk * ga * std::fabs(u) + std::fabs(g * sig) * kk * ua + 16 * eps * std::fabs(v));
  return v * scale;
}

std::function<void(int64_t, int, float*)> weights_from_memory(const void* const* w, const void* const* w_up, DType t,
                                                               bool kn, int64_t N, int64_t K) {
  return [=](int64_t e, int which, float* nk) {
    const void* m = (which ? w_up : w)[e];
    if (!kn) return load_row_f32(m, t, 0, N * K, nk);
    std::vector<float> row(static_cast<size_t>(N));  // [K, N]: one row of N at a time, transposed
    for (int64_t k = 0; k < K; ++k) {
      load_row_f32(m, t, size_t(k * N), N, row.data());
      for (int64_t n = 0; n < N; ++n) nk[n * K + k] = row[size_t(n)];
    }
  };
}

}  // namespace tilecraft::reference
