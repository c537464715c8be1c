#pragma once
// moe_topk_gate's launch pieces, shared with the fused gate + mapping launch.
#include <cstdint>

#include "moe/topk_gate_params.cuh"
#include "tilecraft/ops/moe_topk_gate.h"

namespace tilecraft::ops {

// The kernel's parameter struct for these (validated) arguments.
tc::moe::TopkGateParams topk_gate_kernel_params(const MoeTopkGateArgs& a, const MoeTopkGateParams& p);
// Distinguishes the gate's kernel instantiations (E, K, mode, score rounding).
uint64_t topk_gate_kernel_code(const MoeTopkGateArgs& a, const MoeTopkGateParams& p);

}  // namespace tilecraft::ops
