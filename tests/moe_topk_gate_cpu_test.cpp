// moe_topk_gate on the CPU: validation messages and the routing semantics on
// hand-built inputs (grouping, bias, ties to the smaller index).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <vector>

#include "test_util.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/ops/moe_topk_gate.h"

using namespace tilecraft;
using namespace tilecraft::ops;

namespace {
struct Gate {
  HostTensor logits, bias, ids, weights;
  Gate(int64_t T, int64_t E, int64_t K)
      : logits(DType::kF32, {T, E}), bias(DType::kF32, {E}), ids(DType::kI32, {T, K}), weights(DType::kF32, {T, K}) {
    for (int64_t i = 0; i < T * E; ++i) logits.ptr<float>()[i] = 0.f;
    for (int64_t i = 0; i < E; ++i) bias.ptr<float>()[i] = 0.f;
  }
  MoeTopkGateArgs args(bool with_bias = false) const {
    MoeTopkGateArgs a{logits.view(), std::nullopt, ids.view(), weights.view()};
    if (with_bias) a.bias = bias.view();
    return a;
  }
  std::vector<int> id_row(int64_t t) const {
    const int64_t K = ids.shape()[1];
    return {ids.ptr<int32_t>() + t * K, ids.ptr<int32_t>() + (t + 1) * K};
  }
};
}  // namespace

TEST(MoeTopkGate, SoftmaxTiesGoToTheSmallerIndex) {
  Gate g(1, 6, 3);
  float l[6] = {1, 3, 3, 0, 3, 2};
  std::copy(l, l + 6, g.logits.ptr<float>());
  MoeTopkGateParams p;
  moe_topk_gate_cpu(g.args(), p);
  EXPECT_EQ(g.id_row(0), (std::vector<int>{1, 2, 4}));
  p.renormalize = true;
  moe_topk_gate_cpu(g.args(), p);
  for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ(g.weights.ptr<float>()[k], 1.0f / 3);
}

TEST(MoeTopkGate, SigmoidGroupedKeepsTheBestGroups) {
  // 8 experts in 4 groups of 2; keep 2 groups, pick 2 experts.
  Gate g(1, 8, 2);
  float l[8] = {5, -5, 1, 1, 0, 4, -1, -1};  // group sums: g0 ~1.0, g1 ~1.46, g2 ~1.48, g3 ~0.54
  std::copy(l, l + 8, g.logits.ptr<float>());
  MoeTopkGateParams p;
  p.mode = GateMode::kSigmoidGroupedTopk;
  p.n_group = 4;
  p.topk_group = 2;
  p.renormalize = true;
  p.scale = 2.5f;
  moe_topk_gate_cpu(g.args(true), p);
  // Expert 0 has the best single score but its group (0) is dropped.
  EXPECT_EQ(g.id_row(0), (std::vector<int>{5, 2}));
  EXPECT_NEAR(g.weights.ptr<float>()[0] + g.weights.ptr<float>()[1], 2.5f, 1e-6);
  // A bias moves the choice but not the weights.
  g.bias.ptr<float>()[3] = 0.5f;
  moe_topk_gate_cpu(g.args(true), p);
  EXPECT_EQ(g.id_row(0), (std::vector<int>{3, 5}));  // 0.731 + 0.5 now beats 0.982
}

TEST(MoeTopkGate, ValidationMessages) {
  Gate g(2, 10, 3);
  MoeTopkGateParams p;
  p.mode = GateMode::kSigmoidGroupedTopk;
  p.n_group = 4;  // 10 experts do not split into 4 groups
  TC_EXPECT_ERROR(moe_topk_gate_cpu(g.args(), p), ErrorKind::kInvalidArgument, "moe_topk_gate", "n_group",
                  "divisor of the expert count 10", "4");
  p.n_group = 5;
  p.topk_group = 1;  // 2 eligible experts < K = 3
  TC_EXPECT_ERROR(moe_topk_gate_cpu(g.args(), p), ErrorKind::kInvalidArgument, "'ids'", "K <= topk_group", "K = 3");
  MoeTopkGateParams soft;
  TC_EXPECT_ERROR(moe_topk_gate_cpu(g.args(true), soft), ErrorKind::kInvalidArgument, "'bias'", "softmax_topk");
  HostTensor ids64(DType::kI64, {2, 3});
  auto a = g.args();
  a.ids = ids64.view();
  TC_EXPECT_ERROR(moe_topk_gate_cpu(a, soft), ErrorKind::kType, "'ids'", "int32", "int64");
  HostTensor w_bad(DType::kF32, {2, 4});
  a = g.args();
  a.weights = w_bad.view();
  TC_EXPECT_ERROR(moe_topk_gate_cpu(a, soft), ErrorKind::kInvalidArgument, "'weights'", "[2, 3]", "[2, 4]");
}

TEST(MoeTopkGate, ManifestCasesPassOnCpu) {
  EXPECT_GT(test::expect_manifest_cases_pass("moe_topk_gate", DeviceType::kCPU), 10);
}

// The float64 check (every backend's, GPU runs included) accepts the golden's
// routing and rejects a wrong one: a repeated id, a weight 1% off, and (in
// sigmoid mode, where one expert's score leaves the others' weights as they
// are) a routing that misses an expert whose score beats the chosen ones.
TEST(MoeTopkGateChecks, Float64CheckRejectsWrongRoutings) {
  using namespace tilecraft::harness;
  const Manifest m = Manifest::load();
  const std::string op = "moe_topk_gate";  // named: no reference bound through a temporary (g++ 13 warns)
  const OpAdapter& a = adapter_for(op);
  for (const char* workload : {"deepseek-v3-t16", "kimi-k2-t512", "deepseek-bf16-scores", "qwen3-30b-a3b-t256"}) {
    SCOPED_TRACE(workload);
    Selection s;
    s.op = "moe_topk_gate";
    s.workload = workload;
    std::deque<WorkloadSpec> storage;
    const auto cases = select_cases(m, s, storage);
    ASSERT_EQ(cases.size(), 1u);
    CaseData d = a.generate(cases[0]);
    HostTensor& logits = d.inputs.at("logits");
    const int64_t T = logits.shape()[0], E = logits.shape()[1], K = cases[0].workload->symbols.at("K");
    HostTensor ids(DType::kI32, {T, K}), w(DType::kF32, {T, K});
    const Tensors out{{"ids", ids.view()}, {"weights", w.view()}};
    a.golden(d, out);
    ASSERT_EQ(a.check_f64(d, out).num_failed, 0);
    const int64_t t = 3;
    auto expect_rejected = [&](const char* what, auto&& corrupt) {
      const std::vector<int32_t> ids0(ids.ptr<int32_t>(), ids.ptr<int32_t>() + T * K);
      const std::vector<float> w0(w.ptr<float>(), w.ptr<float>() + T * K),
          l0(logits.ptr<float>() + t * E, logits.ptr<float>() + (t + 1) * E);
      corrupt();
      const F64Check c = a.check_f64(d, out);
      EXPECT_EQ(c.num_failed, 1) << what;
      EXPECT_EQ(c.first_failed, t) << what;
      std::copy(ids0.begin(), ids0.end(), ids.ptr<int32_t>());
      std::copy(w0.begin(), w0.end(), w.ptr<float>());
      std::copy(l0.begin(), l0.end(), logits.ptr<float>() + t * E);
    };
    expect_rejected("a repeated id", [&] { ids.ptr<int32_t>()[t * K + 1] = ids.ptr<int32_t>()[t * K]; });
    expect_rejected("a weight 1% off", [&] { w.ptr<float>()[t * K] *= 1.01f; });
    if (std::string(workload).rfind("qwen", 0) == 0) continue;  // softmax: every weight would move
    // An expert the golden left out now scores above every other: its logit
    // raised to sigmoid 1, and of those left out the one with the largest
    // correction bias (the chosen experts' weights stay as they are). Its
    // absence is wrong.
    std::vector<bool> chosen(size_t(E), false);
    for (int64_t k = 0; k < K; ++k) chosen[size_t(ids.ptr<int32_t>()[t * K + k])] = true;
    const auto bias = d.inputs.find("bias");
    auto bias_of = [&](int64_t e) { return bias == d.inputs.end() ? 0.f : bias->second.ptr<float>()[e]; };
    int64_t left = -1;
    for (int64_t e = 0; e < E; ++e)
      if (!chosen[size_t(e)] && (left < 0 || bias_of(e) > bias_of(left))) left = e;
    ASSERT_GE(left, 0);
    expect_rejected("a missed expert", [&] { logits.ptr<float>()[t * E + left] = 30.f; });
  }
}
