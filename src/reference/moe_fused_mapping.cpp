// CPU golden for moe_fused_mapping: counting sort of the slots by expert,
// stable in (token, slot) order.
#include "tilecraft/reference/moe_fused_mapping.h"

#include <algorithm>
#include <vector>

namespace tilecraft::reference {

void moe_fused_mapping(const MoeFusedMappingRef& r) {
  const int64_t n = r.T * r.K;
  std::vector<int64_t> count(size_t(r.E), 0);
  for (int64_t i = 0; i < n; ++i)
    if (r.ids[i] >= 0 && r.ids[i] < r.E) ++count[size_t(r.ids[i])];
  r.expert_offsets[0] = 0;
  for (int64_t e = 0; e < r.E; ++e) {
    r.tokens_per_expert[e] = int32_t(count[size_t(e)]);
    const int64_t padded = (count[size_t(e)] + r.block_m - 1) / r.block_m * r.block_m;
    r.expert_offsets[e + 1] = int32_t(r.expert_offsets[e] + padded);
  }
  std::fill(r.pos_to_token, r.pos_to_token + r.rows, -1);
  std::vector<int64_t> next(r.expert_offsets, r.expert_offsets + r.E);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t e = r.ids[i];
    if (e < 0 || e >= r.E) {
      r.token_topk_to_pos[i] = -1;
      continue;
    }
    const int64_t row = next[size_t(e)]++;
    r.token_topk_to_pos[i] = int32_t(row);
    r.pos_to_token[row] = int32_t(i / r.K);
  }
  const int64_t used_tiles = r.expert_offsets[r.E] / r.block_m;
  *r.num_tiles = int32_t(used_tiles);
  for (int64_t tile = 0; tile < r.rows / r.block_m; ++tile) {
    int32_t owner = -1;
    if (tile < used_tiles)
      for (int64_t e = 0; e < r.E; ++e)
        if (r.expert_offsets[e] <= tile * r.block_m && tile * r.block_m < r.expert_offsets[e + 1]) owner = int32_t(e);
    r.tile_expert[tile] = owner;
  }
}

}  // namespace tilecraft::reference
