#pragma once
// CPU golden for moe_topk_gate: the routing written the way a PyTorch model
// writes it (softmax or sigmoid, grouped selection, top-k with ties to the
// smaller index), one token at a time.
#include <cstdint>
#include <string>

namespace tilecraft::reference {

struct MoeTopkGateRef {
  const float* logits;  // [T, E]
  const float* bias;    // [E] or null
  int32_t* ids;         // [T, K]
  float* weights;       // [T, K]
  int64_t T, E, K;
  bool sigmoid_grouped;  // false: softmax_topk
  bool renormalize;
  int n_group, topk_group;
  float scale;
  // 0: exact fp32. 1 (fp16) / 2 (bf16): logits and scores rounded to that
  // dtype, as a framework router running in it computes them (Linear output
  // in the activation dtype, softmax/sigmoid output in it too).
  int round_to;
};

// The shapes the selection needs (a workload can ask for any): E >= 1,
// 1 <= K <= E, and for grouped selection (n_group > 1) n_group dividing E
// and topk_group groups holding at least K experts. Else an Error naming
// `op` and the argument: the golden checks it, and the adapters before
// generating (a workload that cannot exist, not a failed case).
void check_moe_topk_gate_shape(const std::string& op, int64_t E, int64_t K, bool sigmoid_grouped, int n_group,
                               int topk_group);

// v rounded to the score dtype `round_to` names (identity for 0).
float round_score(float v, int round_to);

// The score each expert is selected by for token t (softmax probability, or
// sigmoid + bias with experts of dropped groups at -inf), and the weight it
// would carry (probability or sigmoid). Both arrays have E entries.
void moe_topk_gate_scores(const MoeTopkGateRef& r, int64_t t, float* select, float* weight);

void moe_topk_gate_rows(const MoeTopkGateRef& r, int64_t t_begin, int64_t t_end);

}  // namespace tilecraft::reference
