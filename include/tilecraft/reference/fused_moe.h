#pragma once
// CPU golden for the routed-experts MoE layer (shared ops/fused_moe.md):
//   logits = x W_router^T; (ids, w) = route(logits);
//   expert_e(v) = round(round(silu(v Wg_e^T) * (v Wu_e^T)) Wd_e^T)
//   out[t] = cast(sum_k fma(expert(x[t]), w[t,k]))   (k in order)
// fp32 accumulation everywhere; `act` is the dtype intermediates are stored
// in (the expanded activations and expert outputs), so the golden rounds
// where a GPU pipeline must store. Weights in nn.Linear layout.
#include <cstdint>

#include "tilecraft/dtype.h"
#include "tilecraft/reference/moe_topk_gate.h"

namespace tilecraft::reference {

struct FusedMoeRef {
  const float* x;         // [T, H], values representable in `act`
  const float* w_router;  // [E, H]
  const float* w_gate;    // [E, I, H]
  const float* w_up;      // [E, I, H]
  const float* w_down;    // [E, H, I]
  const float* bias;      // [E] correction bias (sigmoid routing) or null
  float* out;             // [T, H], rounded to `act`
  int32_t* ids;           // [T, K] (out, may be null)
  float* weights;         // [T, K] (out, may be null)
  int64_t T, H, I, E, K;
  bool sigmoid_grouped = false, renormalize = false;
  int n_group = 1, topk_group = 1;
  float scale = 1.0f;
  DType act = DType::kBF16;
};

// Rounds v to `t` and back (identity for fp32).
float round_to(float v, DType t);

void fused_moe(const FusedMoeRef& r);

}  // namespace tilecraft::reference
