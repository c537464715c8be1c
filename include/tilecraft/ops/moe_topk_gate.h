#pragma once
// moe_topk_gate: router logits -> (ids, weights) of the top-k experts.
// Spec: shared ops/fused_moe.md, "Routing modes".
#include <cuda.h>

#include <optional>

#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"
#include "tilecraft/tensor.h"

namespace tilecraft::ops {

enum class GateMode { kSoftmaxTopk, kSigmoidGroupedTopk };
const char* gate_mode_name(GateMode m);
std::optional<GateMode> parse_gate_mode(const std::string& s);

struct MoeTopkGateArgs {
  TensorView logits;               // [T, E] fp32
  std::optional<TensorView> bias;  // [E] fp32, sigmoid mode only
  TensorView ids;                  // [T, K] int32 (out)
  TensorView weights;              // [T, K] fp32 (out)
};

struct MoeTopkGateParams {
  GateMode mode = GateMode::kSoftmaxTopk;
  bool renormalize = false;
  int n_group = 1, topk_group = 1;  // sigmoid mode: E % n_group == 0
  float scale = 1.0f;               // routed scaling factor (sigmoid mode)
  // kF32: exact. kF16 / kBF16: logits and scores rounded to that dtype before
  // selection, as a PyTorch router in that dtype computes them (the race's).
  DType score_dtype = DType::kF32;
};

// The rounding code the kernel and the reference take: 0 exact, 1 fp16, 2 bf16.
int score_rounding(DType score_dtype);
// One unit in the last place, relative, of the score dtype (0 for exact fp32):
// how far a rounded score may land from another computation's rounding.
double score_ulp(DType score_dtype);

void validate_moe_topk_gate(const MoeTopkGateArgs& a, const MoeTopkGateParams& p, DeviceType backend);
jit::KernelSpec moe_topk_gate_kernel_spec(const MoeTopkGateArgs& a, const MoeTopkGateParams& p);

// CUDA: one warp per token, enqueued on `stream`, no host sync.
void moe_topk_gate(const MoeTopkGateArgs& a, const MoeTopkGateParams& p, CUstream stream,
                   const jit::CompileOptions& compile = {});
void moe_topk_gate_cpu(const MoeTopkGateArgs& a, const MoeTopkGateParams& p);

}  // namespace tilecraft::ops
