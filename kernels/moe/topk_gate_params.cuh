#pragma once
// Kernel parameters of moe_topk_gate, shared verbatim by kernel and host.
namespace tc::moe {

struct TopkGateParams {
  const float* logits;  // [T, E]
  const float* bias;    // [E] or null (sigmoid mode's correction bias)
  int* ids;             // [T, K]
  float* weights;       // [T, K]
  long long num_tokens;
  int num_experts;
  int n_group, topk_group;
  int renormalize;
  float scale;          // routed scaling factor (1 for softmax mode)
};

}  // namespace tc::moe
