// Compiled with -ffp-contract=off (see CMakeLists.txt): every product and sum
// rounds as written.
#include "tilecraft/reference/fused_moe.h"

#include <cmath>
#include <vector>

#include "tilecraft/parallel.h"

namespace tilecraft::reference {

float round_to(float v, DType t) {
  switch (t) {
    case DType::kBF16: return conv::bf16_to_f32(conv::f32_to_bf16(v));
    case DType::kF16: return conv::f16_to_f32(conv::f32_to_f16(v));
    default: return v;
  }
}

namespace {
// y[n] = sum_k a[k] * W[n, k], fp32 accumulation in k order.
void matvec(const float* a, const float* W, float* y, int64_t N, int64_t Kd) {
  for (int64_t n = 0; n < N; ++n) {
    float acc = 0.f;
    for (int64_t k = 0; k < Kd; ++k) acc = std::fma(a[k], W[n * Kd + k], acc);
    y[n] = acc;
  }
}
}  // namespace

void fused_moe(const FusedMoeRef& r) {
  // Routing: router GEMM, then the gate golden.
  std::vector<float> logits(size_t(r.T * r.E));
  parallel_for(r.T, r.E * r.H, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) matvec(r.x + t * r.H, r.w_router, logits.data() + t * r.E, r.E, r.H);
  });
  std::vector<int32_t> ids(size_t(r.T * r.K));
  std::vector<float> w(size_t(r.T * r.K));
  MoeTopkGateRef gate{logits.data(), r.bias,       ids.data(),   w.data(),     r.T,         r.E,
                      r.K,           r.sigmoid_grouped, r.renormalize, r.n_group, r.topk_group, r.scale};
  moe_topk_gate_rows(gate, 0, r.T);
  // Experts, then the combine in k order.
  parallel_for(r.T, r.K * 3 * r.H * r.I, [&](int64_t b, int64_t e) {
    std::vector<float> g(size_t(r.I)), u(size_t(r.I)), y(size_t(r.H)), acc(size_t(r.H));
    for (int64_t t = b; t < e; ++t) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t k = 0; k < r.K; ++k) {
        const int64_t ex = ids[size_t(t * r.K + k)];
        matvec(r.x + t * r.H, r.w_gate + ex * r.I * r.H, g.data(), r.I, r.H);
        matvec(r.x + t * r.H, r.w_up + ex * r.I * r.H, u.data(), r.I, r.H);
        for (int64_t i = 0; i < r.I; ++i) {
          const float silu = g[size_t(i)] / (1.0f + std::exp(-g[size_t(i)]));
          g[size_t(i)] = round_to(silu * u[size_t(i)], r.act);
        }
        matvec(g.data(), r.w_down + ex * r.H * r.I, y.data(), r.H, r.I);
        const float wk = w[size_t(t * r.K + k)];
        for (int64_t h = 0; h < r.H; ++h) acc[size_t(h)] = std::fma(round_to(y[size_t(h)], r.act), wk, acc[size_t(h)]);
      }
      for (int64_t h = 0; h < r.H; ++h) r.out[t * r.H + h] = round_to(acc[size_t(h)], r.act);
    }
  });
  if (r.ids) std::copy(ids.begin(), ids.end(), r.ids);
  if (r.weights) std::copy(w.begin(), w.end(), r.weights);
}

}  // namespace tilecraft::reference
