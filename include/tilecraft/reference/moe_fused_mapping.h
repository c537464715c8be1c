#pragma once
// CPU golden for moe_fused_mapping.
#include <cstdint>

namespace tilecraft::reference {

struct MoeFusedMappingRef {
  const int32_t* ids;
  int32_t *tokens_per_expert, *expert_offsets, *token_topk_to_pos, *pos_to_token, *tile_expert, *num_tiles;
  int64_t T, K, E, block_m, rows;
};

void moe_fused_mapping(const MoeFusedMappingRef& r);

}  // namespace tilecraft::reference
