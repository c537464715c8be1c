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
  int32_t* ids;           // [T, K] (out, may be null; in when given_routing)
  float* weights;         // [T, K] (out, may be null; in when given_routing)
  int64_t T, H, I, E, K;
  bool sigmoid_grouped = false, renormalize = false;
  int n_group = 1, topk_group = 1;
  float scale = 1.0f;
  int round_scores = 0;  // MoeTopkGateRef::round_to
  DType act = DType::kBF16;
  bool given_routing = false;  // skip router and gate: ids and weights are inputs
  // Where expert e lies in w_gate / w_up / w_down: expert_slot[e] (null: at
  // e). A caller that converts only the routed experts packs them; an expert
  // with no slot (negative) must not be routed to.
  const int64_t* expert_slot = nullptr;
};

// Rounds v to `t` and back (identity for fp32).
float round_to(float v, DType t);

void fused_moe(const FusedMoeRef& r);

// The routing step of fused_moe alone (router GEMM, then the gate golden):
// ids and weights [T, K]. Uses x, w_router, bias and the gate fields of r.
void fused_moe_route(const FusedMoeRef& r, int32_t* ids, float* weights);

// The layer's pieces for one token, as fused_moe composes them (the harness
// uses them for goldens over sampled tokens of model-sized layers).
// logits[e] = sum_h x[h] * w_router[e, h] (fp32, h order).
void fused_moe_router_row(const float* x, const float* w_router, int64_t E, int64_t H, float* logits);
// y = round(round(silu(x Wg^T) * (x Wu^T)) Wd^T); wg, wu [I, H], wd [H, I].
void fused_moe_expert_row(const float* x, const float* wg, const float* wu, const float* wd, int64_t H, int64_t I,
                          DType act, float* y);
// out[h] = round(fma over k in order of y[k][h] * w[k]); y[k] already rounded,
// null for a dropped slot; out is written from the first slot on, so it may
// not be one of the y rows.
void fused_moe_combine_row(const float* const* y, const float* w, int64_t K, int64_t H, DType act, float* out);

}  // namespace tilecraft::reference
