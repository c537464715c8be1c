#pragma once
// fused_moe: the routed-experts MoE layer as one chain on one stream, with no
// host synchronisation (so it is CUDA-graph capturable):
//   router GEMM (grouped GEMM, one group, fp32 logits) -> moe_topk_gate ->
//   moe_fused_mapping -> moe_grouped_gemm gate/up (gathered A, silu*up) ->
//   moe_grouped_gemm down -> moe_reduce_fused (weighted, k in order).
// Deterministic: no atomics anywhere, so equal inputs give equal bits.
// Spec: shared ops/fused_moe.md.
#include <cuda.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/ops/moe_topk_gate.h"
#include "tilecraft/tensor.h"

namespace tilecraft::ops {

struct FusedMoeArgs {
  TensorView x;                    // [T, H] fp16 | bf16
  TensorView w_router;             // [E, H] (nn.Linear layout), dtype of x
  ExpertWeights w_gate, w_up;      // per expert [I, H] (NK) or [H, I] (KN, the race's)
  ExpertWeights w_down;            // per expert [H, I] (NK) or [I, H] (KN)
  std::optional<TensorView> bias;  // [E] fp32 correction bias (sigmoid routing)
  TensorView out;                  // [T, H] dtype of x
  // The routing [T, K]: outputs when the caller wants them, or inputs with
  // FusedMoeParams::given_routing (router and gate skipped: the experts part).
  std::optional<TensorView> ids;      // int32
  std::optional<TensorView> weights;  // fp32
};

struct FusedMoeParams {
  int top_k = 1;
  MoeTopkGateParams gate;
  bool given_routing = false;  // ids and weights are inputs (values outside [0, E) drop the slot)
};

// Device buffers of the chain's intermediates, kept between calls (a layer
// object owns one); grown when a call needs more. One per stream at a time.
class FusedMoeWorkspace {
 public:
  FusedMoeWorkspace() = default;
  ~FusedMoeWorkspace();
  FusedMoeWorkspace(const FusedMoeWorkspace&) = delete;
  FusedMoeWorkspace& operator=(const FusedMoeWorkspace&) = delete;
  CUdeviceptr reserve(size_t bytes, int device);  // may free and reallocate (syncs the device then)
  size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  int device_ = -1;
};

// Stages of the chain, for timing one at a time (`bench` breaks the layer down).
enum class FusedMoeStage : unsigned {
  kRouter = 1, kGate = 2, kMapping = 4, kGateUp = 8, kDown = 16, kCombine = 32, kAll = 63
};

struct FusedMoeOptions {
  MoeGroupedGemmConfig gate_up, down;  // grouped GEMM overrides (block_m shared: the mapping's)
  unsigned stages = unsigned(FusedMoeStage::kAll);  // run only these (later stages read the workspace)
  // Gate and mapping in one launch (moe_topk_gate_mapping) when both run;
  // false: the two kernels one after the other (same bits).
  bool fuse_gate_mapping = true;
  // Blocks of the mapping (MoeFusedMappingParams::blocks; 0 = choose). The
  // fused gate + mapping launch is taken only where the mapping has one.
  int mapping_blocks = 0;
  // Tokens each block of the fused gate + mapping launch selects (1..32; 0 =
  // choose, moe_topk_gate_mapping_tokens_per_block). The same bits either way.
  int gate_tokens_per_block = 0;
  // The decode path: no mapping; gate/up runs on the routing as it is (row
  // t K + k = token t's slot k, expert ids[t, k]) and the down projection
  // sums each token's K rows in order as it computes them (the combine fused
  // in). 1 = take it (an error where it does not apply: [N, K] weights,
  // H and I multiples of 8, 16-byte aligned tensors, no gate_up block_m
  // override), 0 = the mapped path, -1 = choose: where it applies and tokens
  // rarely share an expert, (T - 1) K <= E / 10, so reading each slot's
  // weights on its own re-reads few (T = 1 always).
  int decode = -1;
  // On the decode path at T = 1: 1 = one streaming kernel for both
  // projections with the down projection split along I, then a combine
  // kernel (kernels/moe/decode_split.cuh; an error where it does not apply:
  // sm_90, stacked [N, K] weights, H a multiple of 8 up to 8192, I with a
  // slice width: a multiple of 8 up to 128 dividing it, at least H / 128);
  // 2 = the same with its work split evenly over every SM
  // (kernels/moe/decode_split_balanced.cuh; slower than 1 where measured,
  // and I must fit a ring stage); 0 = the
  // two grouped GEMM launches; -1 = choose (the one
  // kernel where it applies and its (slot, 128-column) units fill the SMs'
  // waves to 90%: DeepSeek-V3 and Kimi-K2 on the H200). Its sums run in
  // another fp32 order than the two launches' (each deterministic).
  int decode_split = -1;
  // decode_split's columns of I per unit (a multiple of 8 up to 128 that
  // divides I): 0 = choose (128 where it divides I, else the width whose
  // units fill the SMs' waves best; narrower widths measured slower).
  int decode_split_cols = 0;
  // decode_split's rows of H per down box, which sets its ring's stage
  // (rows x cols x 2 bytes): 0 = choose (stages of about 32 KB that hold
  // whole gate/up pieces), else a multiple of 8 up to 256.
  int decode_split_box_rows = 0;
  // decode_split's balancing: the last this many down boxes of every unit
  // go to a pool any CTA takes from once every unit's h is published (the
  // same bits either way). -1 = choose (an eighth of the unit's boxes: 8
  // of DeepSeek-V3's 64, ~1 us faster on the H200; 4, 16 and 32 lose),
  // 0 = none.
  int decode_split_pool = -1;
  // The router GEMM ([T, H] x [E, H]^T, fp32 logits: a few tiles with a long
  // K below a few thousand tokens): -1 = choose where moe_grouped_gemm's own
  // 128-row tiles fill less than half the SMs (it ran DeepSeek-V3 T=256 on 2
  // CTAs, ~62 us; T=4096 on 32): on sm_90, warp-specialised 64 x 128 tiles
  // where they number at least a fifth of the SMs; else, where 64 x 64
  // tiles fill at most half the SMs, the mma.sync kernel with K split until
  // tiles x slices fill them (slices of at least two 64-wide k-steps, summed
  // in order: deterministic). 0 = moe_grouped_gemm's own choice.
  int router_split = -1;
  // The mapped path's combine: 1 = fused into the down projection (its
  // warp-specialised kernel's idle producer warps sum each token once its
  // rows are stored, while later tiles compute; an error where that kernel
  // does not run the down projection with A, weights and stores by TMA on
  // the dynamic tile scheduler, see moe_grouped_gemm_combine_blocker),
  // 0 = moe_reduce_fused after it, -1 = choose (0: the fused form was slower
  // wherever measured, 1.02-1.37x the experts scope on H200 and H100). The
  // same bits either way. Only when both the down and combine stages run.
  int fused_combine = -1;
  // The router GEMM's own grouped GEMM overrides (config keys router_KEY):
  // given, they are its config as they are (router_split's choice is not
  // made); the plain KEYs go to the two projections only.
  std::optional<MoeGroupedGemmConfig> router;
  jit::CompileOptions compile;
};

// Options from `--config`-style keys: KEY (a grouped GEMM key, to both
// projections), gate_up_KEY / down_KEY (one of them), router_KEY (the
// router GEMM), mapping_blocks,
// gate_tokens_per_block, decode, decode_split, decode_split_cols,
// decode_split_box_rows, decode_split_pool, router_split; an unknown key or a bad value
// is an error naming `arg` and the key.
FusedMoeOptions fused_moe_options(const std::map<std::string, int>& config, const char* arg);
void validate_fused_moe(const FusedMoeArgs& a, const FusedMoeParams& p, DeviceType backend);
// Whether fused_moe takes the decode path (FusedMoeOptions::decode) for these
// arguments; throws where decode = 1 asks for it and it does not apply.
bool fused_moe_uses_decode(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o = {});
// Whether that decode path is the one-kernel form (FusedMoeOptions::decode_split)
// on a GPU of compute capability cc_major with sm_count SMs (0: this GPU's;
// without one, 9 and 132, as the kernel listings assume).
bool fused_moe_uses_decode_split(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o = {},
                                 int cc_major = 0, int sm_count = 0);
// The router GEMM's grouped GEMM config overrides (FusedMoeOptions::router
// where given, else router_split's choice) on a GPU with sm_count SMs (0:
// this GPU's; without one, the grouped GEMM's own choice) of compute
// capability cc_major (0: this GPU's, else 9 as kernel listings assume).
MoeGroupedGemmConfig fused_moe_router_config(const FusedMoeArgs& a, const FusedMoeParams& p,
                                             const FusedMoeOptions& o = {}, int sm_count = 0, int cc_major = 0);
// Bytes of workspace a call with these shapes needs.
size_t fused_moe_workspace_bytes(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o = {});
// The tile height the mapping pads to and both grouped GEMMs use.
int fused_moe_block_m(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o = {});
// Kernels the chain compiles for these shapes (for `compile` / `inspect`) on
// a GPU of compute capability cc_major (0: the GPU at hand's, or 9 without one)
// with sm_count SMs (0: the GPU at hand's; split-K choices depend on it).
std::vector<jit::KernelSpec> fused_moe_kernel_specs(const FusedMoeArgs& a, const FusedMoeParams& p,
                                                    const FusedMoeOptions& o = {}, int cc_major = 0,
                                                    int sm_count = 0);

// ws null: stream-ordered scratch for this call only.
void fused_moe(const FusedMoeArgs& a, const FusedMoeParams& p, CUstream stream, FusedMoeWorkspace* ws = nullptr,
               const FusedMoeOptions& o = {});
void fused_moe_cpu(const FusedMoeArgs& a, const FusedMoeParams& p);

// The gate and up halves of a fused gate/up tensor w13 [E, 2I, H] (each
// expert's gate rows, then its up rows, as vLLM and SGLang keep them): the
// views w13[:, :I] and w13[:, I:], stacked [E, I, H] matrices 2IH elements
// apart, to pass as FusedMoeArgs::w_gate / w_up as they are (no copy).
std::pair<TensorView, TensorView> gate_up_views(const TensorView& w13);

}  // namespace tilecraft::ops
