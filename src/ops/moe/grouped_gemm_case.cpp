#include "ops/moe/grouped_gemm_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/parallel.h"

namespace tilecraft::harness {

ops::ExpertWeights expert_weights_of(const TensorView& t, ops::WeightLayout layout, bool per_expert) {
  ops::ExpertWeights w;
  w.layout = layout;
  if (!per_expert) {
    w.stacked = t;
    return w;
  }
  const int64_t E = t.shape[0], r = t.shape[1], c = t.shape[2];
  for (int64_t e = 0; e < E; ++e)
    w.per_expert.emplace_back(static_cast<char*>(t.data) + e * r * c * int64_t(dtype_size(t.dtype)), t.dtype,
                              Shape{r, c}, t.device);
  return w;
}

MappingLayout map_routing(const HostTensor& ids, int64_t E, int64_t block_m) {
  const int64_t T = ids.shape()[0], K = ids.shape()[1];
  const int64_t rows = ops::moe_fused_mapping_rows(T, K, E, block_m);
  MappingLayout m{HostTensor(DType::kI32, {E}),    HostTensor(DType::kI32, {E + 1}),
                  HostTensor(DType::kI32, {T, K}), HostTensor(DType::kI32, {rows}),
                  HostTensor(DType::kI32, {rows / block_m}), HostTensor(DType::kI32, {1}), {}, 0};
  ops::moe_fused_mapping_cpu({ids.view(), m.tokens_per_expert.view(), m.expert_offsets.view(),
                              m.token_topk_to_pos.view(), m.pos_to_token.view(), m.tile_expert.view(),
                              m.num_tiles.view()},
                             {int(E), int(block_m)});
  m.counts.assign(m.tokens_per_expert.ptr<int32_t>(), m.tokens_per_expert.ptr<int32_t>() + E);
  for (int32_t c : m.counts) m.touched += c > 0;
  return m;
}

void load_generated_expert(const GeneratedInput& g, uint64_t seed, int64_t e, int64_t N, int64_t K, bool kn,
                           float* nk) {
  const int64_t base = e * N * K;
  if (!kn) {
    parallel_for(N, K, [&](int64_t b, int64_t end) {
      for (int64_t n = b; n < end; ++n) generated_values(g, seed, base + n * K, K, nk + n * K);
    });
    return;
  }
  parallel_for(K, N, [&](int64_t b, int64_t end) {
    std::vector<float> row(static_cast<size_t>(N));
    for (int64_t k = b; k < end; ++k) {
      generated_values(g, seed, base + k * N, N, row.data());
      for (int64_t n = 0; n < N; ++n) nk[n * K + k] = row[size_t(n)];
    }
  });
}

std::vector<uint8_t> golden_rows(const reference::MoeGroupedGemmRef& r, double full_macs, int64_t sample) {
  std::vector<uint8_t> mask(size_t(r.M), 0);
  std::vector<std::vector<int64_t>> by_expert(size_t(r.E));
  int64_t real = 0;
  for (int64_t row = 0; row < r.M; ++row) {
    const int64_t e = reference::grouped_gemm_row_expert(r, row);
    if (e < 0) continue;
    by_expert[size_t(e)].push_back(row);
    real += reference::grouped_gemm_source_row(r, row) >= 0;
  }
  if (double(real) * double(r.N) * double(r.K) * (r.gated ? 2 : 1) <= full_macs) {
    for (auto& rows : by_expert)
      for (int64_t row : rows) mask[size_t(row)] = 1;
    return mask;
  }
  // Up to 16 experts spread over the touched ones (each costs one generated
  // weight matrix); in each, its first and last row with data, its first
  // padding row, and evenly spaced rows.
  std::vector<int64_t> touched;
  for (int64_t e = 0; e < r.E; ++e)
    if (!by_expert[size_t(e)].empty()) touched.push_back(e);
  const int64_t experts = std::min<int64_t>(16, int64_t(touched.size()));
  const int64_t per = std::max<int64_t>(3, sample / std::max<int64_t>(experts, 1));
  for (int64_t i = 0; i < experts; ++i) {
    const auto& rows = by_expert[size_t(touched[size_t(i * int64_t(touched.size()) / experts)])];
    std::vector<int64_t> data;
    bool pad_taken = false;
    for (int64_t row : rows) {
      if (reference::grouped_gemm_source_row(r, row) >= 0) data.push_back(row);
      else if (!pad_taken) mask[size_t(row)] = 1, pad_taken = true;
    }
    if (data.empty()) continue;
    mask[size_t(data.front())] = mask[size_t(data.back())] = 1;
    for (int64_t j = 1; j + 1 < per; ++j) mask[size_t(data[size_t(j * int64_t(data.size()) / per)])] = 1;
  }
  return mask;
}

bool compare_rows(const Tolerance& tol, const std::vector<uint8_t>& mask, const TensorView& want,
                  const TensorView& got, nlohmann::json& r) {
  const int64_t N = want.shape[1];
  const size_t row_bytes = size_t(N) * dtype_size(want.dtype);
  std::vector<int64_t> rows;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) rows.push_back(int64_t(i));
  const int64_t R = int64_t(rows.size());
  HostTensor w(want.dtype, {R, N}), g(got.dtype, {R, N});
  for (int64_t i = 0; i < R; ++i) {
    std::memcpy(static_cast<char*>(w.data()) + size_t(i) * row_bytes,
                static_cast<const char*>(want.data) + size_t(rows[size_t(i)]) * row_bytes, row_bytes);
    std::memcpy(static_cast<char*>(g.data()) + size_t(i) * row_bytes,
                static_cast<const char*>(got.data) + size_t(rows[size_t(i)]) * row_bytes, row_bytes);
  }
  bool ok = compare_tensor(tol, w.view(), g.view(), r);
  if (r.contains("first_failure")) {
    const int64_t idx = r["first_failure"].value("index", int64_t(0));
    r["first_failure"]["row"] = rows[size_t(idx / N)];
    r["first_failure"]["col"] = idx % N;
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < R * N; ++i) {
    const double a = load_as_double(w.data(), w.dtype(), size_t(i)), b = load_as_double(g.data(), g.dtype(), size_t(i));
    num += (b - a) * (b - a);
    den += a * a;
  }
  const double rel_rms = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  r["rel_rms_err"] = rel_rms;
  r["max_rel_rms_err"] = kMaxRelRms;
  r["rows_compared"] = R;
  r["rows_total"] = int64_t(mask.size());
  if (!(rel_rms <= kMaxRelRms)) ok = false;
  return ok;
}

F64Check check_rows_f64(const reference::MoeGroupedGemmRef& r, const std::vector<uint8_t>& mask,
                        const TensorView& out) {
  // One unit in the last place of the output dtype, relative: the final cast
  // (and, for results in the subnormal range, one step of it).
  const double ulp = out.dtype == DType::kBF16 ? 1.0 / 128 : out.dtype == DType::kF16 ? 1.0 / 1024 : 1.0 / (1 << 23);
  F64Check c;
  std::vector<float> w(size_t(r.N * r.K)), wu(r.gated ? size_t(r.N * r.K) : 0);
  std::vector<std::vector<int64_t>> by_expert(size_t(r.E));
  for (int64_t row = 0; row < r.M; ++row)
    if (mask[size_t(row)]) {
      const int64_t e = reference::grouped_gemm_row_expert(r, row);
      if (e >= 0) by_expert[size_t(e)].push_back(row);
    }
  for (int64_t e = 0; e < r.E; ++e) {
    const auto& rows = by_expert[size_t(e)];
    if (rows.empty()) continue;
    r.load_w(e, 0, w.data());
    if (r.gated) r.load_w(e, 1, wu.data());
    // The expert's rows in parallel chunks, each checked apart and merged in
    // row order (the same result as one pass).
    std::vector<F64Check> part(rows.size());
    parallel_for(int64_t(rows.size()), r.N * r.K * (r.gated ? 4 : 2), [&](int64_t b, int64_t end) {
      std::vector<float> x(size_t(r.K));
      for (int64_t i = b; i < end; ++i) {
        const int64_t row = rows[size_t(i)], src = reference::grouped_gemm_source_row(r, row);
        F64Check& pc = part[size_t(i)];
        if (src >= 0) r.load_a(src, x.data());
        else std::fill(x.begin(), x.end(), 0.f);
        const double scale = r.row_scale ? r.row_scale[row] : 1.0;
        for (int64_t n = 0; n < r.N; ++n) {
          double bound = 0;
          const double want = reference::grouped_gemm_value_f64(x.data(), w.data() + n * r.K,
                                                                r.gated ? wu.data() + n * r.K : nullptr, r.K, scale,
                                                                &bound);
          const double got = load_as_double(out.data, out.dtype, size_t(row * r.N + n));
          const double allowed = bound * (1 + ulp) + ulp * std::fabs(want) + subnormal_step(out.dtype);
          pc.add(std::fabs(got - want), allowed, row * r.N + n);
        }
      }
    });
    for (const F64Check& pc : part) c.merge(pc);
  }
  return c;
}

}  // namespace tilecraft::harness
