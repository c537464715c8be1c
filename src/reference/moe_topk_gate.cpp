#include "tilecraft/reference/moe_topk_gate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "tilecraft/dtype.h"
#include "tilecraft/error.h"

namespace tilecraft::reference {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Indices of the k largest values, ties to the smaller index, best first.
std::vector<int> topk(const std::vector<float>& v, int64_t k) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[size_t(a)] > v[size_t(b)]; });
  idx.resize(size_t(k));
  return idx;
}

void check(const MoeTopkGateRef& r) {
  check_moe_topk_gate_shape("moe_topk_gate (CPU golden)", r.E, r.K, r.sigmoid_grouped, r.n_group, r.topk_group);
}
}  // namespace

void check_moe_topk_gate_shape(const std::string& op, int64_t E, int64_t K, bool sigmoid_grouped, int n_group,
                               int topk_group) {
  TC_CHECK_ARG(E >= 1, op, "E", "at least one expert", std::to_string(E));
  TC_CHECK_ARG(K >= 1 && K <= E, op, "K", fmt::format("1..{} (the experts)", E), std::to_string(K));
  if (!sigmoid_grouped || n_group <= 1) return;
  TC_CHECK_ARG(E % n_group == 0, op, "n_group", fmt::format("a divisor of E = {}", E), std::to_string(n_group));
  TC_CHECK_ARG(topk_group >= 1 && topk_group <= n_group && topk_group * (E / n_group) >= K, op, "topk_group",
               fmt::format("1..{} groups holding at least K = {} experts", n_group, K), std::to_string(topk_group));
}

float round_score(float v, int round_to) {
  if (round_to == 1) return conv::f16_to_f32(conv::f32_to_f16(v));
  if (round_to == 2) return conv::bf16_to_f32(conv::f32_to_bf16(v));
  return v;
}

namespace {
// moe_topk_gate_scores without the argument check (the caller made it).
void scores(const MoeTopkGateRef& r, int64_t t, float* select, float* weight) {
  std::vector<float> row(r.logits + t * r.E, r.logits + (t + 1) * r.E);
  for (float& v : row) v = round_score(v, r.round_to);
  if (!r.sigmoid_grouped) {
    float m = kNegInf;
    for (int64_t e = 0; e < r.E; ++e) m = std::max(m, row[size_t(e)]);
    float sum = 0.f;
    for (int64_t e = 0; e < r.E; ++e) sum += std::exp(row[size_t(e)] - m);
    for (int64_t e = 0; e < r.E; ++e)
      select[e] = weight[e] = round_score(std::exp(row[size_t(e)] - m) / sum, r.round_to);
    return;
  }
  for (int64_t e = 0; e < r.E; ++e) {
    weight[e] = round_score(1.0f / (1.0f + std::exp(-row[size_t(e)])), r.round_to);
    select[e] = weight[e] + (r.bias ? r.bias[e] : 0.f);
  }
  if (r.n_group <= 1) return;
  const int64_t gsize = r.E / r.n_group;
  std::vector<float> gscore(size_t(r.n_group));
  for (int g = 0; g < r.n_group; ++g) {
    std::vector<float> members(select + g * gsize, select + (g + 1) * gsize);
    auto best = topk(members, std::min<int64_t>(2, gsize));
    float s = 0.f;
    for (int i : best) s += members[size_t(i)];
    gscore[size_t(g)] = s;
  }
  auto keep = topk(gscore, r.topk_group);
  for (int64_t e = 0; e < r.E; ++e)
    if (std::find(keep.begin(), keep.end(), int(e / gsize)) == keep.end()) select[e] = kNegInf;
}
}  // namespace

void moe_topk_gate_scores(const MoeTopkGateRef& r, int64_t t, float* select, float* weight) {
  check(r);
  scores(r, t, select, weight);
}

void moe_topk_gate_rows(const MoeTopkGateRef& r, int64_t t_begin, int64_t t_end) {
  check(r);
  std::vector<float> select(size_t(r.E)), weight(size_t(r.E));
  for (int64_t t = t_begin; t < t_end; ++t) {
    scores(r, t, select.data(), weight.data());
    auto ids = topk(select, r.K);
    float denom = 0.f;
    for (int i : ids) denom += weight[size_t(i)];
    const float scale = r.sigmoid_grouped ? r.scale : 1.0f;
    for (int64_t k = 0; k < r.K; ++k) {
      float w = weight[size_t(ids[size_t(k)])];
      r.ids[t * r.K + k] = ids[size_t(k)];
      r.weights[t * r.K + k] = (r.renormalize ? w / denom : w) * scale;
    }
  }
}

}  // namespace tilecraft::reference
