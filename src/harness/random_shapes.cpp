#include "tilecraft/harness/random_shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <random>

#include "tilecraft/error.h"

namespace tilecraft::harness {
namespace {
struct Draw {
  std::mt19937_64 g;
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(g); }
  template <typename T>
  T pick(std::initializer_list<T> v) {
    return *(v.begin() + in(0, int64_t(v.size()) - 1));
  }
  // A routing of the GEMM and mapping workloads, uniform twice as often.
  const char* routing() { return pick({"uniform", "uniform", "skewed", "one_hot", "empty_experts", "dropped"}); }
  // Mostly multiples of 8 (the models'), a third of the time any width
  // (the layer's tails: unaligned rows, N and K tails).
  int64_t width(int64_t lo, int64_t hi) { return coin(0.35) ? in(lo, hi) : 8 * in((lo + 7) / 8, hi / 8); }
  // Token counts across every path: none, decode, mid-size, prefill.
  int64_t tokens(int64_t hi) {
    switch (in(0, 5)) {
      case 0:
        return pick<int64_t>({0, 1, 2, 3});
      case 1:
        return in(1, 16);
      case 2:
        return in(17, 128);
      case 3:
        return in(129, 700);
      default:
        return in(700, hi);
    }
  }
  int64_t experts() { return coin() ? pick<int64_t>({1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 384}) : in(1, 300); }
};

std::vector<int64_t> divisors_upto(int64_t n, int64_t hi) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= std::min(n, hi); ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// sigmoid_grouped_topk's groups over E experts (n_group a divisor of E up
// to 32, topk_group of them kept) and the experts they leave eligible; one
// group of all experts in softmax mode.
struct Groups {
  int64_t n_group = 1, topk_group = 1, eligible = 0;
};
Groups draw_groups(Draw& r, int64_t E, bool sigmoid) {
  Groups g{1, 1, E};
  if (sigmoid) {
    const auto d = divisors_upto(E, 32);
    g.n_group = d[size_t(r.in(0, int64_t(d.size()) - 1))];
    g.topk_group = r.in(1, g.n_group);
    g.eligible = g.topk_group * (E / g.n_group);
  }
  return g;
}
}  // namespace

std::vector<std::string> random_layer_shapes(uint64_t seed, int count, ShapeBudget budget) {
  const int64_t max_weights = budget.weights ? budget.weights : 160'000'000;
  const int64_t max_macs = budget.macs ? budget.macs : 6'000'000'000;
  Draw r{std::mt19937_64(seed)};
  std::vector<std::string> out;
  while (int(out.size()) < count) {
    const int64_t E = r.experts(), T = r.tokens(3000);
    const int64_t H = r.width(16, 1536), I = r.width(8, 1024);
    // Host and device memory for the weights and the golden's work stay small.
    if (E * 3 * H * I > max_weights) continue;
    const bool sigmoid = E >= 2 && r.coin(0.4);
    const Groups gr = draw_groups(r, E, sigmoid);
    const int64_t kmax = std::min<int64_t>(gr.eligible, 16);
    const int64_t K = r.coin(0.6) ? std::min<int64_t>(kmax, r.pick<int64_t>({1, 2, 4, 6, 8})) : r.in(1, kmax);
    if (T * K * 3 * H * I > max_macs) continue;
    const char* routing = r.pick({"router", "router", "router", "uniform", "skewed", "empty_experts", "dropped"});
    // fused: gate and up as the two views of one w13 [E, 2I, H] (experts
    // 2IH apart; with odd H * I their bases and stride break 16-byte
    // alignment, and the layer takes its unvectorised paths).
    std::string s = fmt::format("T={},H={},I={},E={},K={},dtype={},weights={},routing={}", T, H, I, E, K,
                                r.coin() ? "bf16" : "fp16", r.pick({"per_expert", "stacked", "fused"}), routing);
    if (sigmoid)
      s += fmt::format(",mode=sigmoid_grouped_topk,n_group={},topk_group={},scale={}", gr.n_group, gr.topk_group,
                       r.pick({"1.0", "2.5"}));
    if (r.coin()) s += ",renormalize=true";
    if (r.coin(0.3)) s += ",router_scores=dtype";
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> random_gemm_shapes(uint64_t seed, int count, ShapeBudget budget) {
  const int64_t max_weights = budget.weights ? budget.weights : 24'000'000;
  const int64_t max_macs = budget.macs ? budget.macs : 1'500'000'000;
  Draw r{std::mt19937_64(seed ^ 0x9e3779b97f4a7c15ull)};
  std::vector<std::string> out;
  while (int(out.size()) < count) {
    const int64_t E = r.experts(), T = r.tokens(4000);
    const int64_t N = r.width(8, 2048), K = r.width(8, 2048);
    if (E * N * K > max_weights) continue;
    const int64_t topk = std::min<int64_t>(E, r.coin(0.6) ? r.pick<int64_t>({1, 2, 4, 8}) : r.in(1, 16));
    if (T * topk * N * K > max_macs) continue;
    const bool contiguous = r.coin(0.4);
    std::string s = fmt::format("T={},topk={},E={},N={},K={},dtype={},layout={},weights={},a_rows={},routing={}", T,
                                topk, E, N, K, r.coin() ? "bf16" : "fp16", r.coin() ? "kn" : "nk",
                                r.coin() ? "per_expert" : "stacked", contiguous ? "contiguous" : "gathered",
                                r.routing());
    if (contiguous && r.coin(0.3)) s += ",padding=skipped";
    if (r.coin(0.3)) s += fmt::format(",block_m={}", r.pick({16, 32, 64, 128}));
    if (r.coin(0.25)) s += ",values=wide";
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> random_gate_shapes(uint64_t seed, int count) {
  Draw r{std::mt19937_64(seed ^ 0x51afd7ed558ccd5bull)};
  std::vector<std::string> out;
  while (int(out.size()) < count) {
    const int64_t E = r.coin() ? r.pick<int64_t>({1, 2, 8, 64, 128, 256, 384, 512, 1024}) : r.in(1, 1024);
    const int64_t T = r.tokens(6000);
    const bool sigmoid = r.coin(0.5);
    const Groups gr = draw_groups(r, E, sigmoid);
    const int64_t K = r.coin(0.6) ? std::min<int64_t>(gr.eligible, r.pick<int64_t>({1, 2, 4, 8}))
                                  : r.in(1, std::min<int64_t>(gr.eligible, 32));
    std::string s = fmt::format("T={},E={},K={},logits={},scores={}", T, E, K, r.pick({"uniform", "uniform", "ties"}),
                                r.pick({"fp32", "fp32", "fp16", "bf16"}));
    if (sigmoid)
      s += fmt::format(",mode=sigmoid_grouped_topk,n_group={},topk_group={},scale={},bias={}", gr.n_group,
                       gr.topk_group, r.pick({"1.0", "2.5"}), r.coin() ? "true" : "false");
    if (r.coin()) s += ",renormalize=true";
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> random_mapping_shapes(uint64_t seed, int count) {
  Draw r{std::mt19937_64(seed ^ 0x2545f4914f6cdd1dull)};
  std::vector<std::string> out;
  while (int(out.size()) < count) {
    const int64_t E = r.coin() ? r.pick<int64_t>({1, 2, 8, 64, 128, 256, 384, 1024}) : r.in(1, 1024);
    const int64_t T = r.tokens(20000), K = std::min<int64_t>(E, r.coin(0.6) ? r.pick<int64_t>({1, 2, 8}) : r.in(1, 32));
    const int64_t block_m = r.coin(0.6) ? r.pick<int64_t>({1, 16, 32, 64, 128}) : r.in(1, 1024);
    out.push_back(fmt::format("T={},K={},E={},block_m={},routing={}", T, K, E, block_m,
                              r.routing()));
  }
  return out;
}

std::vector<std::string> random_reduce_shapes(uint64_t seed, int count) {
  Draw r{std::mt19937_64(seed ^ 0x9fb21c651e98df25ull)};
  std::vector<std::string> out;
  while (int(out.size()) < count) {
    const int64_t experts = r.coin() ? r.pick<int64_t>({1, 2, 8, 64, 128, 256, 384}) : r.in(1, 512);
    const int64_t T = r.tokens(6000),
                  K = std::min<int64_t>(experts, r.coin(0.6) ? r.pick<int64_t>({1, 2, 4, 8}) : r.in(1, 16));
    const int64_t H = r.width(1, 8192);
    if (T * K * H > 200'000'000) continue;
    const char* routing = r.pick({"uniform", "uniform", "ep_local", "all_skip", "duplicate"});
    const auto d = divisors_upto(experts, 16);
    const int64_t ep = std::string(routing) == "ep_local" ? d[size_t(r.in(0, int64_t(d.size()) - 1))] : 1;
    out.push_back(fmt::format("T={},K={},H={},experts={},ep={},dtype={},routing={}", T, K, H, experts, ep,
                              r.pick({"fp32", "bf16", "fp16"}), routing));
  }
  return out;
}
std::vector<std::string> random_shapes(const std::string& op, uint64_t seed, int count) {
  // Each draw is a case of its own (a second or more on a GPU): past this
  // a run would not end, and the draws alone would fill the host's memory.
  constexpr int kMostDraws = 100000;
  if (count < 0 || count > kMostDraws)
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: --random: expected a count 0..{}, got {}", op, kMostDraws, count));
  if (op == "fused_moe") return random_layer_shapes(seed, count);
  if (op == "moe_grouped_gemm") return random_gemm_shapes(seed, count);
  if (op == "moe_topk_gate") return random_gate_shapes(seed, count);
  if (op == "moe_fused_mapping") return random_mapping_shapes(seed, count);
  if (op == "moe_reduce_fused") return random_reduce_shapes(seed, count);
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("--random: expected --op fused_moe, moe_grouped_gemm, moe_topk_gate, moe_fused_mapping or "
                          "moe_reduce_fused (the ops with a shape generator), got '{}'",
                          op));
}
}  // namespace tilecraft::harness
