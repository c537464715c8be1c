// Compiled with -ffp-contract=off (see CMakeLists.txt): every product and sum
// rounds as written.
#include "tilecraft/reference/fused_moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tilecraft/parallel.h"
#include "tilecraft/reference/fma_chain.h"

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
void matvec(const float* a, const float* W, float* y, int64_t N, int64_t Kd) { fma_dots(a, W, N, Kd, y); }
}  // namespace

void fused_moe_router_row(const float* x, const float* w_router, int64_t E, int64_t H, float* logits) {
  matvec(x, w_router, logits, E, H);
}

void fused_moe_expert_row(const float* x, const float* wg, const float* wu, const float* wd, int64_t H, int64_t I,
                          DType act, float* y) {
  std::vector<float> g(static_cast<size_t>(I)), u(static_cast<size_t>(I));
  matvec(x, wg, g.data(), I, H);
  matvec(x, wu, u.data(), I, H);
  for (int64_t i = 0; i < I; ++i) {
    const float silu = g[size_t(i)] / (1.0f + std::exp(-g[size_t(i)]));
    g[size_t(i)] = round_to(silu * u[size_t(i)], act);
  }
  matvec(g.data(), wd, y, H, I);
  for (int64_t h = 0; h < H; ++h) y[h] = round_to(y[h], act);
}

void fused_moe_combine_row(const float* const* y, const float* w, int64_t K, int64_t H, DType act, float* out) {
  // out starts at zero and takes one slot's terms at a time (each element's
  // FMAs still in k order).
  std::fill(out, out + H, 0.f);
  for (int64_t k = 0; k < K; ++k)
    if (y[k]) fma_axpy(y[k], w[k], out, H);
  for (int64_t h = 0; h < H; ++h) out[h] = round_to(out[h], act);
}

void fused_moe_route(const FusedMoeRef& r, int32_t* ids, float* weights) {
  std::vector<float> logits(size_t(r.T * r.E));
  parallel_for(r.T, r.E * r.H, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      fused_moe_router_row(r.x + t * r.H, r.w_router, r.E, r.H, logits.data() + t * r.E);
  });
  MoeTopkGateRef gate{logits.data(), r.bias,       ids,         weights,     r.T,     r.E,
                      r.K,           r.sigmoid_grouped, r.renormalize, r.n_group, r.topk_group, r.scale,
                      r.round_scores};
  moe_topk_gate_rows(gate, 0, r.T);
}

void fused_moe(const FusedMoeRef& r) {
  std::vector<int32_t> ids(size_t(r.T * r.K));
  std::vector<float> w(size_t(r.T * r.K));
  if (r.given_routing) {
    std::copy(r.ids, r.ids + r.T * r.K, ids.begin());
    std::copy(r.weights, r.weights + r.T * r.K, w.begin());
  } else {
    fused_moe_route(r, ids.data(), w.data());
  }
  // Experts, then the combine in k order.
  parallel_for(r.T, r.K * 3 * r.H * r.I, [&](int64_t b, int64_t e) {
    std::vector<float> y(size_t(r.K * r.H));
    std::vector<const float*> rows(size_t(r.K));
    for (int64_t t = b; t < e; ++t) {
      for (int64_t k = 0; k < r.K; ++k) {
        const int64_t ex = ids[size_t(t * r.K + k)];
        rows[size_t(k)] = nullptr;
        if (ex < 0 || ex >= r.E) continue;  // a dropped slot contributes nothing
        const int64_t s = r.expert_slot ? r.expert_slot[ex] : ex;
        float* yk = y.data() + k * r.H;
        fused_moe_expert_row(r.x + t * r.H, r.w_gate + s * r.I * r.H, r.w_up + s * r.I * r.H,
                             r.w_down + s * r.H * r.I, r.H, r.I, r.act, yk);
        rows[size_t(k)] = yk;
      }
      fused_moe_combine_row(rows.data(), w.data() + t * r.K, r.K, r.H, r.act, r.out + t * r.H);
    }
  });
  if (r.ids && !r.given_routing) std::copy(ids.begin(), ids.end(), r.ids);
  if (r.weights && !r.given_routing) std::copy(w.begin(), w.end(), r.weights);
}

}  // namespace tilecraft::reference
