#include "tilecraft/ops/moe_topk_gate.h"

#include <cmath>

#include "moe/topk_gate_params.cuh"
#include "ops/check.h"
#include "ops/moe/topk_gate_launch.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/moe_topk_gate.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {
constexpr const char* kOp = "moe_topk_gate";
constexpr int kMaxExperts = 1024;  // 32 per lane in registers
constexpr int kMaxTopK = 32;
constexpr int kMaxGroups = 32;     // the kernel's group mask is 32 bits
constexpr int kWarpsPerBlock = 4;  // tc::moe::kGateWarpsPerBlock

reference::MoeTopkGateRef ref_of(const MoeTopkGateArgs& a, const MoeTopkGateParams& p) {
  return {a.logits.ptr<float>(), a.bias ? a.bias->ptr<float>() : nullptr, a.ids.ptr<int32_t>(),
          a.weights.ptr<float>(), a.logits.shape[0], a.logits.shape[1], a.ids.shape[1],
          p.mode == GateMode::kSigmoidGroupedTopk, p.renormalize, p.n_group, p.topk_group, p.scale,
          score_rounding(p.score_dtype)};
}
}  // namespace

int score_rounding(DType score_dtype) {
  return score_dtype == DType::kF16 ? 1 : score_dtype == DType::kBF16 ? 2 : 0;
}

double score_ulp(DType score_dtype) {
  return score_dtype == DType::kF16 ? 0x1p-10 : score_dtype == DType::kBF16 ? 0x1p-7 : 0.0;
}

const char* gate_mode_name(GateMode m) {
  return m == GateMode::kSoftmaxTopk ? "softmax_topk" : "sigmoid_grouped_topk";
}

std::optional<GateMode> parse_gate_mode(const std::string& s) {
  if (s == "softmax_topk") return GateMode::kSoftmaxTopk;
  if (s == "sigmoid_grouped_topk") return GateMode::kSigmoidGroupedTopk;
  return std::nullopt;
}

void validate_moe_topk_gate(const MoeTopkGateArgs& a, const MoeTopkGateParams& p, DeviceType backend) {
  const Device on = tensors_device(backend, a.logits);  // every tensor must be on it
  check_tensor(a.logits, kOp, "logits", {DType::kF32}, 2, on);
  check_tensor(a.ids, kOp, "ids", {DType::kI32}, 2, on);
  check_tensor(a.weights, kOp, "weights", {DType::kF32}, 2, on);
  const int64_t T = a.logits.shape[0], E = a.logits.shape[1], K = a.ids.shape[1];
  TC_CHECK_ARG(p.score_dtype == DType::kF32 || p.score_dtype == DType::kF16 || p.score_dtype == DType::kBF16, kOp,
               "score_dtype", "fp32, fp16 or bf16", dtype_name(p.score_dtype));
  TC_CHECK_ARG(E >= 1 && E <= kMaxExperts, kOp, "logits", fmt::format("1..{} experts (columns)", kMaxExperts),
               a.logits.describe());
  TC_CHECK_ARG(a.ids.shape[0] == T && K >= 1 && K <= std::min<int64_t>(E, kMaxTopK), kOp, "ids",
               fmt::format("shape [{}, K] with 1 <= K (top_k) <= {}", T, std::min<int64_t>(E, kMaxTopK)), a.ids.describe());
  TC_CHECK_ARG(a.weights.shape == a.ids.shape, kOp, "weights", "the shape of ids " + a.ids.shape.str(),
               a.weights.describe());
  if (p.mode == GateMode::kSoftmaxTopk) {
    TC_CHECK_ARG(!a.bias, kOp, "bias", "no correction bias in softmax_topk mode", "a bias tensor");
    TC_CHECK_ARG(p.n_group == 1 && p.topk_group == 1, kOp, "n_group",
                 "n_group = topk_group = 1 in softmax_topk mode",
                 fmt::format("n_group {}, topk_group {}", p.n_group, p.topk_group));
    return;
  }
  if (a.bias) {
    check_tensor(*a.bias, kOp, "bias", {DType::kF32}, 1, on);
    TC_CHECK_ARG(a.bias->shape[0] == E, kOp, "bias", fmt::format("shape [{}] (one per expert)", E), a.bias->describe());
  }
  TC_CHECK_ARG(p.n_group >= 1 && p.n_group <= kMaxGroups, kOp, "n_group", fmt::format("1..{}", kMaxGroups),
               std::to_string(p.n_group));
  TC_CHECK_ARG(E % p.n_group == 0, kOp, "n_group", fmt::format("a divisor of the expert count {}", E),
               std::to_string(p.n_group));
  TC_CHECK_ARG(p.topk_group >= 1 && p.topk_group <= p.n_group, kOp, "topk_group",
               fmt::format("1..n_group ({})", p.n_group), std::to_string(p.topk_group));
  const int64_t eligible = int64_t(p.topk_group) * (E / p.n_group);
  TC_CHECK_ARG(K <= eligible, kOp, "ids", fmt::format("K <= topk_group * E / n_group = {}", eligible),
               fmt::format("K = {}", K));
  TC_CHECK_ARG(std::isfinite(p.scale), kOp, "scale", "a finite routed scaling factor", std::to_string(p.scale));
}

jit::KernelSpec moe_topk_gate_kernel_spec(const MoeTopkGateArgs& a, const MoeTopkGateParams& p) {
  const int64_t E = a.logits.shape[1], K = a.ids.shape[1];
  const int epl = int((E + 31) / 32);
  const int mode = p.mode == GateMode::kSoftmaxTopk ? 0 : 1;
  return {"moe/topk_gate.cuh",
          "tc::moe::topk_gate_kernel",
          {std::to_string(mode), std::to_string(epl), std::to_string(K), std::to_string(score_rounding(p.score_dtype))},
          fmt::format("{} E={} K={} epl={} scores={}", gate_mode_name(p.mode), E, K, epl, dtype_name(p.score_dtype)),
          true};
}

tc::moe::TopkGateParams topk_gate_kernel_params(const MoeTopkGateArgs& a, const MoeTopkGateParams& p) {
  return {a.logits.ptr<float>(), a.bias ? a.bias->ptr<float>() : nullptr, a.ids.ptr<int>(),
          a.weights.ptr<float>(), (long long)a.logits.shape[0], int(a.logits.shape[1]), p.n_group,
          p.topk_group, p.renormalize ? 1 : 0, p.mode == GateMode::kSigmoidGroupedTopk ? p.scale : 1.0f};
}

uint64_t topk_gate_kernel_code(const MoeTopkGateArgs& a, const MoeTopkGateParams& p) {
  return uint64_t(a.logits.shape[1]) | uint64_t(a.ids.shape[1]) << 16 |
         uint64_t(p.mode == GateMode::kSigmoidGroupedTopk) << 24 | uint64_t(score_rounding(p.score_dtype)) << 25;
}

void moe_topk_gate(const MoeTopkGateArgs& a, const MoeTopkGateParams& p, CUstream stream,
                   const jit::CompileOptions& compile) {
  validate_moe_topk_gate(a, p, DeviceType::kCUDA);
  const int64_t T = a.logits.shape[0];
  if (T == 0) return;
  const DeviceCall call(a.logits.device, stream, kOp);
  const int dev = a.logits.device.index;
  static jit::OpKernelCache kernels;
  const jit::Launchable* k =
      &kernels.get(topk_gate_kernel_code(a, p), compile, dev, [&] { return moe_topk_gate_kernel_spec(a, p); });
  tc::moe::TopkGateParams kp = topk_gate_kernel_params(a, p);
  const unsigned grid = unsigned((T + kWarpsPerBlock - 1) / kWarpsPerBlock);
  TC_CHECK_ARG((T + kWarpsPerBlock - 1) / kWarpsPerBlock <= 0x7fffffff, kOp, "logits", "fewer than 2^33 tokens",
               a.logits.describe());
  jit::launch(*k, grid, 1, kWarpsPerBlock * 32, 0, stream, &kp);
}

void moe_topk_gate_cpu(const MoeTopkGateArgs& a, const MoeTopkGateParams& p) {
  validate_moe_topk_gate(a, p, DeviceType::kCPU);
  auto r = ref_of(a, p);
  parallel_for(r.T, r.E * 8, [&r](int64_t b, int64_t e) { reference::moe_topk_gate_rows(r, b, e); });
}

}  // namespace tilecraft::ops
