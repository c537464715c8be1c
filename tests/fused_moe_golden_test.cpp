// The layer golden against the layer built from its parts: routing outputs,
// the mapping golden (expert-major rows), per-expert MLPs over gathered rows,
// and the moe_reduce_fused golden. Same arithmetic in the same order, so the
// two must agree bit for bit; a disagreement means a part's semantics drifted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tilecraft/harness/random.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/reference/fma_chain.h"
#include "tilecraft/reference/fused_moe.h"
#include "tilecraft/reference/moe_fused_mapping.h"
#include "tilecraft/reference/moe_reduce_fused.h"

using namespace tilecraft;
using namespace tilecraft::reference;

namespace {
std::vector<float> random_vec(int64_t n, uint64_t seed, uint64_t stream, float scale, DType act) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = round_to(scale * (2 * harness::random_unit(seed, stream, uint64_t(i)) - 1), act);
  return v;
}

void check_layer(int64_t T, int64_t H, int64_t I, int64_t E, int64_t K, bool sigmoid, int n_group, int topk_group) {
  const DType act = DType::kBF16;
  const uint64_t seed = 4242;  // fixed, recorded
  auto x = random_vec(T * H, seed, 1, 1.f, act);
  auto wr = random_vec(E * H, seed, 2, 0.3f, act);
  auto wg = random_vec(E * I * H, seed, 3, 0.2f, act);
  auto wu = random_vec(E * I * H, seed, 4, 0.2f, act);
  auto wd = random_vec(E * H * I, seed, 5, 0.2f, act);
  auto bias = random_vec(E, seed, 6, 0.05f, DType::kF32);
  std::vector<float> out(size_t(T * H));
  std::vector<int32_t> ids(size_t(T * K));
  std::vector<float> w(size_t(T * K));
  FusedMoeRef r{x.data(), wr.data(), wg.data(), wu.data(), wd.data(), sigmoid ? bias.data() : nullptr, out.data(),
                ids.data(), w.data(), T, H, I, E, K};
  r.sigmoid_grouped = sigmoid;
  r.renormalize = true;
  r.n_group = n_group;
  r.topk_group = topk_group;
  r.scale = sigmoid ? 2.5f : 1.0f;
  r.act = act;
  fused_moe(r);

  // The same layer from its parts.
  const int64_t bm = 4, rows = ops::moe_fused_mapping_rows(T, K, E, bm);
  std::vector<int32_t> cnt(static_cast<size_t>(E)), off(size_t(E + 1)), pos(size_t(T * K)), p2t(static_cast<size_t>(rows)),
      tiles(size_t(rows / bm)), ntiles(1);
  moe_fused_mapping({ids.data(), cnt.data(), off.data(), pos.data(), p2t.data(), tiles.data(), ntiles.data(), T, K, E,
                     bm, rows});
  std::vector<uint16_t> y(size_t(rows * H), 0);  // expert outputs, stored as bf16
  std::vector<float> g(static_cast<size_t>(I)), u(static_cast<size_t>(I));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t row = off[size_t(e)]; row < off[size_t(e)] + cnt[size_t(e)]; ++row) {
      const float* xt = x.data() + p2t[size_t(row)] * H;
      for (int64_t i = 0; i < I; ++i) {
        float a = 0.f, b = 0.f;
        for (int64_t h = 0; h < H; ++h) {
          a = std::fma(xt[h], wg[size_t((e * I + i) * H + h)], a);
          b = std::fma(xt[h], wu[size_t((e * I + i) * H + h)], b);
        }
        const float silu = a / (1.0f + std::exp(-a));
        g[size_t(i)] = round_to(silu * b, act);
      }
      for (int64_t h = 0; h < H; ++h) {
        float acc = 0.f;
        for (int64_t i = 0; i < I; ++i) acc = std::fma(g[size_t(i)], wd[size_t((e * H + h) * I + i)], acc);
        y[size_t(row * H + h)] = conv::f32_to_bf16(acc);
      }
    }
  std::vector<uint16_t> combined(size_t(T * H));
  MoeReduceFusedRef c{y.data(), DType::kBF16, pos.data(), w.data(), nullptr, nullptr, combined.data(), DType::kBF16,
                      T, K, H, rows};
  moe_reduce_fused_rows(c, 0, T);
  for (int64_t i = 0; i < T * H; ++i)
    ASSERT_EQ(conv::f32_to_bf16(out[size_t(i)]), combined[size_t(i)]) << "element " << i;
}
}  // namespace

TEST(FusedMoeGolden, SoftmaxLayerEqualsItsParts) { check_layer(37, 64, 48, 8, 2, false, 1, 1); }

TEST(FusedMoeGolden, GroupedSigmoidLayerEqualsItsParts) { check_layer(29, 32, 24, 16, 4, true, 4, 2); }

// The goldens' shared sums (fma_chain.h) equal one std::fma chain per output
// in term order, bit for bit, at sizes around their 8-row blocking (values
// over many exponents, so any other order or rounding would show).
TEST(FmaChain, DotsAndAxpyEqualOneChainInOrder) {
  auto values = [](int64_t n, uint64_t stream) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float u = harness::random_unit(5202, stream, uint64_t(i));  // fixed seed, recorded here
      v[size_t(i)] = std::ldexp(2 * u - 1, int(harness::random_bits(5202, stream + 100, uint64_t(i)) % 24) - 12);
    }
    return v;
  };
  for (int64_t N : {0, 1, 7, 8, 9, 16, 23}) {
    for (int64_t K : {0, 1, 5, 64, 131}) {
      const auto x = values(K, 1), W = values(N * K, 2);
      std::vector<float> got(size_t(N) + 1, -7.f);
      fma_dots(x.data(), W.data(), N, K, got.data());
      for (int64_t n = 0; n < N; ++n) {
        float want = 0.f;
        for (int64_t k = 0; k < K; ++k) want = std::fma(x[size_t(k)], W[size_t(n * K + k)], want);
        ASSERT_EQ(std::memcmp(&want, &got[size_t(n)], 4), 0) << "N=" << N << " K=" << K << " n=" << n;
      }
      EXPECT_EQ(got[size_t(N)], -7.f) << "fma_dots wrote past y[N - 1]";
    }
  }
  const auto a = values(37, 3), b = values(37, 4);
  std::vector<float> acc = values(37, 5), want = acc;
  fma_axpy(a.data(), 0.375f, acc.data(), 37);
  fma_axpy(b.data(), -3.5f, acc.data(), 37);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::fma(b[i], -3.5f, std::fma(a[i], 0.375f, want[i]));
  EXPECT_EQ(std::memcmp(acc.data(), want.data(), acc.size() * 4), 0);
}
