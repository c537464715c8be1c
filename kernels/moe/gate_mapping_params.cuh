#pragma once
// Kernel parameters of the fused moe_topk_gate + moe_fused_mapping launch.
#include "moe/fused_mapping_params.cuh"
#include "moe/topk_gate_params.cuh"

namespace tc::moe {

struct GateMappingParams {
  TopkGateParams gate;
  FusedMappingParams mapping;  // mapping.ids == gate.ids
  unsigned* done;              // reads 0 at launch; the last block resets it
  int tokens_per_block;        // 1..32: the first warps of each block select a token each
};

}  // namespace tc::moe
