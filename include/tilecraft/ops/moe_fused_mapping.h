#pragma once
// moe_fused_mapping: top-k expert ids -> the expert-major layout the grouped
// GEMMs and the combine need, built on the device without a host sync.
// Spec: shared ops/fused_moe.md, step 2.
#include <cuda.h>

#include <vector>

#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"
#include "tilecraft/ops/moe_topk_gate.h"
#include "tilecraft/tensor.h"

namespace tilecraft::ops {

struct MoeFusedMappingArgs {
  TensorView ids;                // [T, K] int32; values outside [0, E) are dropped slots
  TensorView tokens_per_expert;  // [E] int32 (out)
  TensorView expert_offsets;     // [E + 1] int32 (out): expert e owns rows [off[e], off[e+1])
  TensorView token_topk_to_pos;  // [T, K] int32 (out): row of each slot, -1 if dropped
  TensorView pos_to_token;       // [rows] int32 (out): token of each row, -1 for padding
  TensorView tile_expert;        // [rows / block_m] int32 (out): expert of each tile, -1 past the end
  TensorView num_tiles;          // [1] int32 (out)
};

struct MoeFusedMappingParams {
  int num_experts = 0;
  int block_m = 1;  // each expert's rows padded to a multiple (the grouped GEMM's tile M)
  // Blocks that build the layout: 1 = one block (one launch), N > 1 = N
  // blocks in two launches (count, then place; for many slots, where one
  // block is bound by its SM's issue rate), 0 = choose
  // (moe_fused_mapping_blocks). The same bits either way.
  int blocks = 0;
};

// The most blocks MoeFusedMappingParams::blocks may ask for (each placing
// block sums every block's counts per expert).
constexpr int kMoeFusedMappingMaxBlocks = 1024;

// Blocks the mapping of `slots` (T*K) slots runs on for `blocks` as in
// MoeFusedMappingParams (0: one block below 8192 slots, else one per 1024
// slots, at most one per SM; sm_count 0 = unknown, taken as 132).
int moe_fused_mapping_blocks(int64_t slots, int blocks, int sm_count);

// Rows the layout can need: T*K + E*(block_m - 1), rounded up to block_m.
int64_t moe_fused_mapping_rows(int64_t T, int64_t K, int64_t E, int64_t block_m);

void validate_moe_fused_mapping(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p, DeviceType backend);
jit::KernelSpec moe_fused_mapping_kernel_spec();
// The two kernels of the several-block path (count, place).
std::vector<jit::KernelSpec> moe_fused_mapping_block_kernel_specs();

// CUDA: one block or several (p.blocks), enqueued on `stream`; no host sync;
// graph-capturable (the several-block path's per-block counts live in
// stream-ordered scratch).
void moe_fused_mapping(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p, CUstream stream,
                       const jit::CompileOptions& compile = {});
void moe_fused_mapping_cpu(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p);

// moe_topk_gate then moe_fused_mapping in one launch (the last block to
// finish its tokens builds the layout), bitwise the same results. `m.ids`
// must be `g.ids`. The layer's routing path: at decode sizes it saves a
// launch and its wait.
// Whether the fused launch takes E experts and top-k K (E <= 256, K <= 8:
// the gate's registers must fit 1024 threads a block); else run the two ops.
bool moe_topk_gate_mapping_fits(int64_t num_experts, int64_t top_k);
jit::KernelSpec moe_topk_gate_mapping_kernel_spec(const MoeTopkGateArgs& g, const MoeTopkGateParams& gp);
// Tokens a block of the fused launch can select: a warp each, 1024 threads.
constexpr int kMoeTopkGateMappingMaxTokensPerBlock = 32;
// tokens_per_block: tokens a block selects (1..32; 0 = choose,
// moe_topk_gate_mapping_tokens_per_block). The same bits either way.
void moe_topk_gate_mapping(const MoeTopkGateArgs& g, const MoeTopkGateParams& gp, const MoeFusedMappingArgs& m,
                           const MoeFusedMappingParams& mp, CUstream stream, const jit::CompileOptions& compile = {},
                           int tokens_per_block = 0);
// The choice for T tokens on sm_count SMs (0 = unknown, taken as 132): at
// least 4 (up to 4 tokens: one block, no completion counter), more only
// where blocks of 4 would exceed one per SM (at most 32).
int moe_topk_gate_mapping_tokens_per_block(int64_t T, int sm_count);

}  // namespace tilecraft::ops
