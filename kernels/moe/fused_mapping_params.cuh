#pragma once
// Kernel parameters of moe_fused_mapping, shared verbatim by kernel and host.
namespace tc::moe {

struct FusedMappingParams {
  const int* ids;          // [T, K] expert of each slot; outside [0, E) = dropped
  int* tokens_per_expert;  // [E]
  int* expert_offsets;     // [E + 1], each expert's segment padded to block_m rows
  int* token_topk_to_pos;  // [T, K] row of each slot, -1 if dropped
  int* pos_to_token;       // [rows] token of each row, -1 for padding
  int* tile_expert;        // [rows / block_m] expert of each block_m-row tile, -1 past the end
  int* num_tiles;          // [1]
  long long num_slots;     // T * K
  int top_k;               // K
  int num_experts;         // E
  int block_m;             // row padding / tile height
  int rows;                // capacity of pos_to_token (a multiple of block_m)
};

// The several-block path: per-block expert counts, [blocks][num_experts],
// written by the counting launch and read by the placing one.
struct MappingBlocksParams {
  FusedMappingParams p;
  int* block_counts;
};

}  // namespace tc::moe
