#include "tilecraft/ops/moe_fused_mapping.h"

#include <algorithm>
#include <climits>

#include "moe/gate_mapping_params.cuh"
#include "ops/check.h"
#include "ops/moe/launch_counters.h"
#include "ops/moe/topk_gate_launch.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/reference/moe_fused_mapping.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {
constexpr const char* kOp = "moe_fused_mapping";
constexpr int kMaxExperts = 1024;  // per-warp counters in shared memory: 32 * E ints
constexpr int kThreads = 1024;     // tc::moe::kMappingThreads
constexpr int kWarps = 32;
static_assert(kMoeTopkGateMappingMaxTokensPerBlock == kWarps, "the fused launch selects a token per warp");
constexpr int kMaxBlocks = kMoeFusedMappingMaxBlocks;
constexpr int64_t kBlocksFrom = 8192;     // slots from which the choice spreads the work
constexpr int64_t kSlotsPerBlock = 1024;  // one per thread
// The gate's registers at 1024 threads a block fit 64 without spills up to
// here (8 experts per lane; K = 16 spilled 20 bytes).
constexpr int kFusedGateMaxExperts = 256, kFusedGateMaxTopK = 8;

void check_i32(const TensorView& t, const char* arg, const Shape& shape, const Device& on) {
  check_tensor(t, kOp, arg, {DType::kI32}, shape, on);
}

reference::MoeFusedMappingRef ref_of(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p) {
  return {a.ids.ptr<int32_t>(), a.tokens_per_expert.ptr<int32_t>(), a.expert_offsets.ptr<int32_t>(),
          a.token_topk_to_pos.ptr<int32_t>(), a.pos_to_token.ptr<int32_t>(), a.tile_expert.ptr<int32_t>(),
          a.num_tiles.ptr<int32_t>(), a.ids.shape[0], a.ids.shape[1], p.num_experts, p.block_m,
          a.pos_to_token.shape[0]};
}
}  // namespace

int64_t moe_fused_mapping_rows(int64_t T, int64_t K, int64_t E, int64_t block_m) {
  // (Also called alone, e.g. from Python to size the outputs: the ranges
  // that keep the arithmetic below finite and in int64.)
  TC_CHECK_ARG(block_m >= 1 && block_m <= 1024, kOp, "block_m", "1..1024", std::to_string(block_m));
  TC_CHECK_ARG(E >= 1 && E <= kMaxExperts, kOp, "num_experts", fmt::format("1..{}", kMaxExperts), std::to_string(E));
  TC_CHECK_ARG(T >= 0 && K >= 0 && (K == 0 || T <= (int64_t(1) << 40) / K), kOp, "ids",
               "[T, K] with T, K >= 0 and fewer than 2^40 slots", fmt::format("T = {}, K = {}", T, K));
  const int64_t most = T * K + E * (block_m - 1);
  return (most + block_m - 1) / block_m * block_m;
}

void validate_moe_fused_mapping(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p, DeviceType backend) {
  const Device on = tensors_device(backend, a.ids);  // every tensor must be on it
  TC_CHECK_ARG(p.num_experts >= 1 && p.num_experts <= kMaxExperts, kOp, "num_experts",
               fmt::format("1..{}", kMaxExperts), std::to_string(p.num_experts));
  TC_CHECK_ARG(p.block_m >= 1 && p.block_m <= 1024, kOp, "block_m", "1..1024", std::to_string(p.block_m));
  TC_CHECK_ARG(p.blocks >= 0 && p.blocks <= kMaxBlocks, kOp, "blocks",
               fmt::format("0 (choose), 1 (one block) or up to {} blocks", kMaxBlocks), std::to_string(p.blocks));
  TC_CHECK_ARG(a.ids.ndim() == 2, kOp, "ids", "a 2-D tensor [T, K]", a.ids.describe());
  const int64_t T = a.ids.shape[0], K = a.ids.shape[1], E = p.num_experts;
  check_i32(a.ids, "ids", a.ids.shape, on);
  TC_CHECK_ARG(K >= 1, kOp, "ids", "at least one slot per token (K >= 1)", a.ids.describe());
  const int64_t rows = moe_fused_mapping_rows(T, K, E, p.block_m);
  TC_CHECK_ARG(rows <= INT_MAX, kOp, "ids", "fewer than 2^31 rows in the layout", a.ids.describe());
  check_i32(a.tokens_per_expert, "tokens_per_expert", {E}, on);
  check_i32(a.expert_offsets, "expert_offsets", {E + 1}, on);
  check_i32(a.token_topk_to_pos, "token_topk_to_pos", {T, K}, on);
  check_i32(a.pos_to_token, "pos_to_token", {rows}, on);
  check_i32(a.tile_expert, "tile_expert", {rows / p.block_m}, on);
  check_i32(a.num_tiles, "num_tiles", {1}, on);
}

jit::KernelSpec moe_fused_mapping_kernel_spec() {
  return {"moe/fused_mapping.cuh", "tc::moe::fused_mapping_kernel", {}, "fused_mapping 1024 threads", true};
}

std::vector<jit::KernelSpec> moe_fused_mapping_block_kernel_specs() {
  return {{"moe/fused_mapping.cuh", "tc::moe::mapping_count_kernel", {}, "mapping count 1024 threads", true},
          {"moe/fused_mapping.cuh", "tc::moe::mapping_scatter_kernel", {}, "mapping place 1024 threads", true}};
}

int moe_fused_mapping_blocks(int64_t slots, int blocks, int sm_count) {
  if (blocks > 0) return blocks;
  if (slots < kBlocksFrom) return 1;
  const int64_t most = std::min<int64_t>(sm_count > 0 ? sm_count : 132, kMaxBlocks);
  return int(std::clamp<int64_t>((slots + kSlotsPerBlock - 1) / kSlotsPerBlock, 2, most));
}

namespace {
// Per-warp counters take 32*E ints: raise the dynamic shared memory limit
// once (the placing kernel of the several-block path adds 2*E).
void allow_mapping_smem(const jit::Launchable& l) {
  TC_DRV(cuFuncSetAttribute, l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (kWarps + 3) * kMaxExperts * 4 + 4);
}

tc::moe::FusedMappingParams kernel_params(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p) {
  const int64_t T = a.ids.shape[0], K = a.ids.shape[1];
  return {a.ids.ptr<int>(), a.tokens_per_expert.ptr<int>(), a.expert_offsets.ptr<int>(),
          a.token_topk_to_pos.ptr<int>(), a.pos_to_token.ptr<int>(), a.tile_expert.ptr<int>(),
          a.num_tiles.ptr<int>(), (long long)(T * K), int(K), p.num_experts, p.block_m,
          int(a.pos_to_token.shape[0])};
}

unsigned mapping_smem(const MoeFusedMappingParams& p) { return unsigned((kWarps * p.num_experts + p.num_experts + 1) * 4); }
}  // namespace

void moe_fused_mapping(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p, CUstream stream,
                       const jit::CompileOptions& compile) {
  validate_moe_fused_mapping(a, p, DeviceType::kCUDA);
  const DeviceCall call(a.ids.device, stream, kOp);
  static jit::OpKernelCache kernels;
  const int dev = a.ids.device.index;
  tc::moe::FusedMappingParams kp = kernel_params(a, p);
  const int blocks = moe_fused_mapping_blocks(kp.num_slots, p.blocks, sm_count_if_gpu(dev));
  if (blocks == 1) {
    const jit::Launchable* k =
        &kernels.get(0, compile, dev, [] { return moe_fused_mapping_kernel_spec(); }, allow_mapping_smem);
    jit::launch(*k, 1, 1, kThreads, mapping_smem(p), stream, &kp);
    return;
  }
  // The specs are built only when a kernel is compiled, not on every call.
  const jit::Launchable* count =
      &kernels.get(1, compile, dev, [] { return moe_fused_mapping_block_kernel_specs()[0]; }, allow_mapping_smem);
  const jit::Launchable* place =
      &kernels.get(2, compile, dev, [] { return moe_fused_mapping_block_kernel_specs()[1]; }, allow_mapping_smem);
  // Per-block counts, [blocks][E]: written by the first launch, read by the
  // second, freed in stream order after it.
  rt::ScratchBuffer counts(size_t(blocks) * size_t(p.num_experts) * sizeof(int), stream);
  tc::moe::MappingBlocksParams bp{kp, reinterpret_cast<int*>(counts.get())};
  jit::launch(*count, unsigned(blocks), 1, kThreads, unsigned(p.num_experts * 4), stream, &bp);
  jit::launch(*place, unsigned(blocks), 1, kThreads, unsigned(((kWarps + 3) * p.num_experts + 1) * 4), stream, &bp);
}

bool moe_topk_gate_mapping_fits(int64_t num_experts, int64_t top_k) {
  return num_experts <= kFusedGateMaxExperts && top_k <= kFusedGateMaxTopK;
}

jit::KernelSpec moe_topk_gate_mapping_kernel_spec(const MoeTopkGateArgs& g, const MoeTopkGateParams& gp) {
  jit::KernelSpec spec = moe_topk_gate_kernel_spec(g, gp);
  spec.header = "moe/gate_mapping.cuh";
  spec.function = "tc::moe::topk_gate_mapping_kernel";
  spec.config = "gate+mapping " + spec.config;
  return spec;
}

// Few tokens a block: 32 selections on one SM were bound by its issue rate,
// and the completion counter of a grid costs less than that. H200, session
// 18, scope gate_mapping (us): DeepSeek-V3 T=256 17.5-17.7 at 2 or 4 tokens
// a block against 24.5 at 32; Qwen3-30B T=256 14.5-14.6 at 4, 14.8-14.9 at 2,
// 17.0-17.2 at 32; DeepSeek-V3 T=16 14.7-14.8 at 1 or 4 against 15.6-15.7
// at 16 (one block). Four is the floor: up to 4 tokens keep one block and
// skip the counter.
int moe_topk_gate_mapping_tokens_per_block(int64_t T, int sm_count) {
  constexpr int64_t kFewest = 4, kMost = kMoeTopkGateMappingMaxTokensPerBlock;
  const int64_t sms = sm_count > 0 ? sm_count : 132;
  return int(std::clamp<int64_t>((T + sms - 1) / sms, kFewest, kMost));
}

void moe_topk_gate_mapping(const MoeTopkGateArgs& g, const MoeTopkGateParams& gp, const MoeFusedMappingArgs& m,
                           const MoeFusedMappingParams& mp, CUstream stream, const jit::CompileOptions& compile,
                           int tokens_per_block) {
  TC_CHECK_ARG(tokens_per_block >= 0 && tokens_per_block <= kMoeTopkGateMappingMaxTokensPerBlock, kOp,
               "tokens_per_block",
               fmt::format("0 (choose) or 1..{} tokens a block selects", kMoeTopkGateMappingMaxTokensPerBlock),
               std::to_string(tokens_per_block));
  TC_CHECK_ARG(m.ids.data == g.ids.data && m.ids.shape == g.ids.shape, kOp, "ids",
               "the gate's ids tensor (the mapping reads what the gate writes)",
               fmt::format("{} against the gate's {}", m.ids.describe(), g.ids.describe()));
  validate_moe_topk_gate(g, gp, DeviceType::kCUDA);
  validate_moe_fused_mapping(m, mp, DeviceType::kCUDA);
  TC_CHECK_ARG(moe_topk_gate_mapping_fits(g.logits.shape[1], g.ids.shape[1]), kOp, "logits",
               fmt::format("at most {} experts and top-{} for the fused gate + mapping launch", kFusedGateMaxExperts,
                           kFusedGateMaxTopK),
               fmt::format("{} with top-{}", g.logits.describe(), g.ids.shape[1]));
  TC_CHECK_ARG(g.logits.shape[1] == mp.num_experts, kOp, "num_experts",
               fmt::format("{} (columns of the logits)", g.logits.shape[1]), std::to_string(mp.num_experts));
  const int64_t T = g.logits.shape[0];
  if (T == 0) return moe_fused_mapping(m, mp, stream, compile);  // no gate block to run the mapping
  const DeviceCall call(g.logits.device, stream, kOp);
  const int64_t tpb = tokens_per_block ? tokens_per_block
                                       : moe_topk_gate_mapping_tokens_per_block(T, sm_count_if_gpu(g.logits.device.index));
  TC_CHECK_ARG((T + tpb - 1) / tpb <= 0x7fffffff, kOp, "logits",
               fmt::format("fewer than 2^31 blocks of {} tokens", tpb), g.logits.describe());
  static jit::OpKernelCache kernels;
  const jit::Launchable* k =
      &kernels.get(topk_gate_kernel_code(g, gp), compile, g.logits.device.index,
                   [&] { return moe_topk_gate_mapping_kernel_spec(g, gp); }, allow_mapping_smem);
  tc::moe::GateMappingParams args{topk_gate_kernel_params(g, gp), kernel_params(m, mp),
                                  launch_counter_pair(g.logits.device.index, stream, kOp), int(tpb)};
  jit::launch(*k, unsigned((T + tpb - 1) / tpb), 1, kThreads, mapping_smem(mp), stream, &args);
}

void moe_fused_mapping_cpu(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p) {
  validate_moe_fused_mapping(a, p, DeviceType::kCPU);
  reference::moe_fused_mapping(ref_of(a, p));
}

}  // namespace tilecraft::ops
