#include "tilecraft/ops/moe_fused_mapping.h"

#include <climits>

#include "moe/fused_mapping_params.cuh"
#include "ops/check.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/reference/moe_fused_mapping.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {
constexpr const char* kOp = "moe_fused_mapping";
constexpr int kMaxExperts = 1024;  // per-warp counters in shared memory: 32 * E ints
constexpr int kThreads = 1024;     // tc::moe::kMappingThreads
constexpr int kWarps = 32;

void check_i32(const TensorView& t, const char* arg, const Shape& shape, DeviceType backend) {
  check_tensor(t, kOp, arg, {DType::kI32}, shape, backend);
}

reference::MoeFusedMappingRef ref_of(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p) {
  return {a.ids.ptr<int32_t>(), a.tokens_per_expert.ptr<int32_t>(), a.expert_offsets.ptr<int32_t>(),
          a.token_topk_to_pos.ptr<int32_t>(), a.pos_to_token.ptr<int32_t>(), a.tile_expert.ptr<int32_t>(),
          a.num_tiles.ptr<int32_t>(), a.ids.shape[0], a.ids.shape[1], p.num_experts, p.block_m,
          a.pos_to_token.shape[0]};
}
}  // namespace

int64_t moe_fused_mapping_rows(int64_t T, int64_t K, int64_t E, int64_t block_m) {
  const int64_t most = T * K + E * (block_m - 1);
  return (most + block_m - 1) / block_m * block_m;
}

void validate_moe_fused_mapping(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p, DeviceType backend) {
  TC_CHECK_ARG(p.num_experts >= 1 && p.num_experts <= kMaxExperts, kOp, "num_experts",
               fmt::format("1..{}", kMaxExperts), std::to_string(p.num_experts));
  TC_CHECK_ARG(p.block_m >= 1 && p.block_m <= 1024, kOp, "block_m", "1..1024", std::to_string(p.block_m));
  TC_CHECK_ARG(a.ids.ndim() == 2, kOp, "ids", "a 2-D tensor [T, K]", a.ids.describe());
  const int64_t T = a.ids.shape[0], K = a.ids.shape[1], E = p.num_experts;
  check_i32(a.ids, "ids", a.ids.shape, backend);
  TC_CHECK_ARG(K >= 1, kOp, "ids", "at least one slot per token (K >= 1)", a.ids.describe());
  const int64_t rows = moe_fused_mapping_rows(T, K, E, p.block_m);
  TC_CHECK_ARG(rows <= INT_MAX, kOp, "ids", "fewer than 2^31 rows in the layout", a.ids.describe());
  check_i32(a.tokens_per_expert, "tokens_per_expert", {E}, backend);
  check_i32(a.expert_offsets, "expert_offsets", {E + 1}, backend);
  check_i32(a.token_topk_to_pos, "token_topk_to_pos", {T, K}, backend);
  check_i32(a.pos_to_token, "pos_to_token", {rows}, backend);
  check_i32(a.tile_expert, "tile_expert", {rows / p.block_m}, backend);
  check_i32(a.num_tiles, "num_tiles", {1}, backend);
}

jit::KernelSpec moe_fused_mapping_kernel_spec() {
  return {"moe/fused_mapping.cuh", "tc::moe::fused_mapping_kernel", {}, "fused_mapping 1024 threads"};
}

void moe_fused_mapping(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p, CUstream stream,
                       const jit::CompileOptions& compile) {
  validate_moe_fused_mapping(a, p, DeviceType::kCUDA);
  const int dev = a.ids.device.index;
  static jit::OpKernelCache kernels;
  const jit::Launchable* k = &kernels.get(
      0, compile, dev, [] { return moe_fused_mapping_kernel_spec(); },
      [](const jit::Launchable& l) {
        // Per-warp counters take 32*E ints: raise the dynamic shared memory limit once.
        TC_DRV(cuFuncSetAttribute, l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               (kWarps + 1) * kMaxExperts * 4 + 4);
      });
  const int64_t T = a.ids.shape[0], K = a.ids.shape[1];
  tc::moe::FusedMappingParams kp{a.ids.ptr<int>(), a.tokens_per_expert.ptr<int>(), a.expert_offsets.ptr<int>(),
                                 a.token_topk_to_pos.ptr<int>(), a.pos_to_token.ptr<int>(), a.tile_expert.ptr<int>(),
                                 a.num_tiles.ptr<int>(), (long long)(T * K), int(K), p.num_experts, p.block_m,
                                 int(a.pos_to_token.shape[0])};
  const unsigned smem = unsigned((kWarps * p.num_experts + p.num_experts + 1) * 4);
  jit::launch(*k, 1, 1, kThreads, smem, stream, &kp);
}

void moe_fused_mapping_cpu(const MoeFusedMappingArgs& a, const MoeFusedMappingParams& p) {
  validate_moe_fused_mapping(a, p, DeviceType::kCPU);
  reference::moe_fused_mapping(ref_of(a, p));
}

}  // namespace tilecraft::ops
