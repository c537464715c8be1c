#include "tilecraft/ops/fused_moe.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "moe/decode_split_params.cuh"
#include "ops/check.h"
#include "ops/moe/decode_split.h"
#include "ops/moe/moe_grouped_gemm_common.h"
#include "tilecraft/error.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/ops/moe_reduce_fused.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/fused_moe.h"
#include "tilecraft/reference/moe_grouped_gemm.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {

constexpr const char* kOp = "fused_moe";
constexpr int kMaxTopK = 32;  // moe_reduce_fused keeps a token's K rows in registers

// One expert's matrix as stored: (rows, cols).
std::pair<int64_t, int64_t> expert_shape(const ExpertWeights& w) {
  const TensorView& t = w.stacked ? *w.stacked : w.per_expert.front();
  return w.stacked ? std::pair{t.shape[1], t.shape[2]} : std::pair{t.shape[0], t.shape[1]};
}

void check_expert_set(const ExpertWeights& w, const char* arg, int64_t E, DType dt, const Device& on) {
  TC_CHECK_ARG(w.stacked || !w.per_expert.empty(), kOp, arg, "a stacked tensor or one tensor per expert",
               "no tensors");
  TC_CHECK_ARG(w.num_experts() == E, kOp, arg, fmt::format("{} experts (rows of w_router)", E),
               fmt::format("{} experts", w.num_experts()));
  if (w.stacked) check_stacked_experts(*w.stacked, kOp, arg, {dt}, on);
  for (size_t e = 0; e < w.per_expert.size(); ++e) {
    const std::string name = fmt::format("{}[{}]", arg, e);
    check_tensor(w.per_expert[e], kOp, name.c_str(), {dt}, 2, on);
    TC_CHECK_ARG(w.per_expert[e].shape == w.per_expert[0].shape, kOp, name,
                 "the shape of " + std::string(arg) + "[0] " + w.per_expert[0].shape.str(),
                 w.per_expert[e].describe());
  }
}

struct Dims {
  int64_t T, H, I, E, K;
};

Dims dims_of(const FusedMoeArgs& a, const FusedMoeParams& p) {
  const auto [gr, gc] = expert_shape(a.w_gate);
  const int64_t I = a.w_gate.layout == WeightLayout::kNK ? gr : gc;
  return {a.x.shape[0], a.x.shape[1], I, a.w_router.shape[0], p.top_k};
}

// 256-byte aligned carve-out of the workspace, in a fixed order.
struct Carver {
  CUdeviceptr base = 0;
  size_t used = 0;
  CUdeviceptr take(size_t bytes) {
    const CUdeviceptr p = base + used;
    used += (bytes + 255) / 256 * 256;
    return p;
  }
};

struct Buffers {
  TensorView logits, ids, weights, counts, offsets, slot_pos, pos_to_token, tile_expert, num_tiles, h, y;
  void* partial = nullptr;  // the one-kernel decode path's partials and h slices (decode_split), else null
};

Buffers carve(const FusedMoeArgs& a, const Dims& d, int64_t bm, CUdeviceptr base, size_t* bytes,
              size_t split_bytes = 0) {
  const int64_t rows = moe_fused_mapping_rows(d.T, d.K, d.E, bm);
  const Device dev{DeviceType::kCUDA, a.x.device.index};
  Carver c{base, 0};
  auto view = [&](DType t, Shape s) {
    const CUdeviceptr p = c.take(size_t(s.numel()) * dtype_size(t));
    return TensorView(reinterpret_cast<void*>(p), t, s, dev);
  };
  Buffers b;
  b.logits = view(DType::kF32, {d.T, d.E});
  b.ids = a.ids ? *a.ids : view(DType::kI32, {d.T, d.K});
  b.weights = a.weights ? *a.weights : view(DType::kF32, {d.T, d.K});
  b.counts = view(DType::kI32, {d.E});
  b.offsets = view(DType::kI32, {d.E + 1});
  b.slot_pos = view(DType::kI32, {d.T, d.K});
  b.pos_to_token = view(DType::kI32, {rows});
  b.tile_expert = view(DType::kI32, {rows / bm});
  b.num_tiles = view(DType::kI32, {1});
  b.h = view(a.x.dtype, {rows, d.I});
  b.y = view(a.x.dtype, {rows, d.H});
  if (split_bytes) b.partial = reinterpret_cast<void*>(c.take(split_bytes));
  *bytes = c.used;
  return b;
}

// The router GEMM's config (FusedMoeOptions::router_split). Its N is the
// expert count (<= 384) and its K the hidden size (thousands), so below a
// few thousand tokens moe_grouped_gemm's own 128-row tiles are a handful of
// CTAs with long K loops: DeepSeek-V3 T=256 ran on two 128 x 256
// warp-specialised tiles over 112 k-steps (~62 of the routing scope's 77 us,
// H200 session 25), T=4096 on 32 (router + gate 93-95 us, session 26), T=1
// on 8 CTAs (~21 us). Where those tiles fill less than half the SMs:
//  - on sm_90 (the wgmma kernel applies), warp-specialised 64 x 128 tiles
//    where they number at least a fifth of the SMs: DeepSeek-V3 T=1024 /
//    2048 / 4096 router + gate 48.5 / 55.9 / 62-65 us against 53 (mma.sync
//    with split K) / 84 / 93-95 (session 26); Qwen3-30B T=4096 a tie;
//  - else, where 64 x 64 mma.sync tiles (16 or 32 rows for T <= 32) fill at
//    most half the SMs: those, with K split until tiles x slices fill them
//    (slices of at least two k-steps; the split reduce sums them in order).
// Without a GPU (sm_count 0) the grouped GEMM's own choice, as its split
// choice does.
MoeGroupedGemmConfig router_config(const MoeGroupedGemmArgs& ra, const Dims& d, const FusedMoeOptions& o, int cc_major,
                                   int sm_count) {
  if (o.router) return *o.router;  // the caller's own config (router_KEY)
  MoeGroupedGemmConfig c;
  if (o.router_split == 0 || sm_count <= 0) return c;
  const auto tiles = [&](int64_t bm, int64_t bn) { return (d.T + bm - 1) / bm * ((d.E + bn - 1) / bn); };
  const int64_t own_bn = d.E <= 64 ? 64 : d.E <= 128 ? 128 : 256;
  if (2 * tiles(128, own_bn) >= sm_count) return c;
  if (5 * tiles(64, 128) >= sm_count && moe_grouped_gemm_wgmma_ok(ra, cc_major)) {
    c.sm90 = 2, c.block_m = 64, c.block_n = 128;
    return c;
  }
  const int64_t bm = d.T <= 16 ? 16 : d.T <= 32 ? 32 : 64, bn = 64, steps = (d.H + 63) / 64;
  if (2 * tiles(bm, bn) > sm_count || steps < 4) return c;
  c.sm90 = 0, c.block_m = int(bm), c.block_n = int(bn);
  c.k_splits = int(std::clamp<int64_t>(sm_count / tiles(bm, bn), 1, std::min<int64_t>(64, steps / 2)));
  return c;
}

MoeGroupedGemmArgs router_args(const FusedMoeArgs& a, const Buffers& b) {
  MoeGroupedGemmArgs g;
  g.a = a.x;
  TensorView w = a.w_router;
  w.shape = Shape{1, a.w_router.shape[0], a.w_router.shape[1]};
  w.strides = Shape{a.w_router.shape[0] * a.w_router.shape[1], a.w_router.shape[1], 1};
  g.w.stacked = w;
  g.out = b.logits;
  return g;
}

MoeGroupedGemmArgs gate_up_args(const FusedMoeArgs& a, const Buffers& b) {
  MoeGroupedGemmArgs g;
  g.a = a.x;
  g.a_index = b.pos_to_token;
  g.tile_expert = b.tile_expert;
  g.num_tiles = b.num_tiles;
  g.w = a.w_gate;
  g.w_up = a.w_up;
  g.out = b.h;
  g.rows_used = b.slot_pos.numel();  // T * top_k
  g.tile_fill = b.pos_to_token;      // each expert's rows first in its tiles
  return g;
}

MoeGroupedGemmArgs down_args(const FusedMoeArgs& a, const Buffers& b, const MoeGroupedGemmConfig& over) {
  MoeGroupedGemmArgs g;
  g.a = b.h;
  g.tile_expert = b.tile_expert;
  g.num_tiles = b.num_tiles;
  g.w = a.w_down;
  g.out = b.y;
  g.rows_used = b.slot_pos.numel();
  g.tile_fill = b.pos_to_token;
  // The decode kernel passes over a tile's real rows only: mark the padding
  // (elsewhere A by TMA, which cannot skip rows, is the faster path).
  if (moe_grouped_gemm_uses_gemv(g, over)) g.row_token = b.pos_to_token;
  return g;
}

bool runs(const FusedMoeOptions& o, FusedMoeStage s) { return (o.stages & unsigned(s)) != 0; }

// Whether the mapped path's combine runs inside the down projection
// (FusedMoeOptions::fused_combine); only when both stages run.
bool fuse_combine(const FusedMoeArgs& a, const Buffers& b, const Dims& d, const FusedMoeOptions& o, int cc_major,
                  int sm_count) {
  TC_CHECK_ARG(o.fused_combine >= -1 && o.fused_combine <= 1, kOp, "fused_combine",
               "0 (moe_reduce_fused), 1 (fused into the down projection) or -1 (choose)",
               std::to_string(o.fused_combine));
  if (o.fused_combine <= 0 || !runs(o, FusedMoeStage::kDown) || !runs(o, FusedMoeStage::kCombine)) return false;
  const MoeGroupedGemmArgs g = down_args(a, b, o.down);
  std::string why = moe_grouped_gemm_combine_blocker(g, moe_grouped_gemm_config(g, o.down, cc_major, sm_count), d.K);
  if (why.empty() && a.out.dtype != g.out.dtype)
    why = fmt::format("out {} (the fused combine writes the activations' type, {})", a.out.describe(),
                      dtype_name(g.out.dtype));
  TC_CHECK_ARG(why.empty(), kOp, "fused_combine",
               "a down projection on the warp-specialised kernel with A, weights and stores by TMA (sm_90)", why);
  return true;
}

// The decode path (FusedMoeOptions::decode): both projections on the decode
// kernels' per-row schedule, tile_expert = the ids as they are.
TensorView flat(const TensorView& t) { return TensorView(t.data, t.dtype, Shape{t.numel()}, t.device); }

TensorView decode_h(const Buffers& b, const Dims& d) {
  return TensorView(b.h.data, b.h.dtype, Shape{d.T * d.K, d.I}, b.h.device);
}

MoeGroupedGemmArgs decode_gate_up_args(const FusedMoeArgs& a, const Buffers& b, const Dims& d) {
  MoeGroupedGemmArgs g;
  g.a = a.x;
  g.a_repeat = d.K;
  g.tile_expert = flat(b.ids);
  g.w = a.w_gate;
  g.w_up = a.w_up;
  g.out = decode_h(b, d);
  g.rows_used = d.T * d.K;
  return g;
}

MoeGroupedGemmArgs decode_down_args(const FusedMoeArgs& a, const Buffers& b, const Dims& d) {
  MoeGroupedGemmArgs g;
  g.a = decode_h(b, d);
  g.tile_expert = flat(b.ids);
  g.row_scale = flat(b.weights);
  g.w = a.w_down;
  g.out = a.out;
  g.combine = d.K;
  g.rows_used = d.T * d.K;
  // The ids were written by the gate (or the caller) before the gate/up
  // launch began: prefetch the first weights while it runs.
  g.schedule_settled = true;
  return g;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Why the decode path cannot run these arguments ("" when it can).
std::string decode_blocker(const FusedMoeArgs& a, const Dims& d, const FusedMoeOptions& o) {
  if (a.w_gate.layout != WeightLayout::kNK) return "[K, N] (KN) weights";
  if (d.H % 8 || d.I % 8) return fmt::format("H = {} and I = {} (not both multiples of 8)", d.H, d.I);
  if (o.gate_up.block_m || o.down.block_m) return "a block_m override (the mapped path's tile height)";
  bool ok = aligned16(a.x.data) && aligned16(a.out.data);
  for (const ExpertWeights* w : {&a.w_gate, &a.w_up, &a.w_down}) ok = ok && grouped_gemm::weights_aligned16(*w);
  return ok ? "" : "tensors not 16-byte aligned";
}

bool decode_path(const FusedMoeArgs& a, const Dims& d, const FusedMoeOptions& o) {
  TC_CHECK_ARG(o.decode >= -1 && o.decode <= 1, kOp, "decode", "0 (mapped path), 1 (decode path) or -1 (choose)",
               std::to_string(o.decode));
  if (o.decode == 0) return false;
  const std::string why = decode_blocker(a, d, o);
  TC_CHECK_ARG(o.decode < 1 || why.empty(), kOp, "decode",
               "arguments the decode path runs ([N, K] weights, H and I multiples of 8, 16-byte aligned tensors, no "
               "block_m override)",
               why);
  return why.empty() && (o.decode == 1 || (d.T - 1) * d.K * 10 <= d.E);
}

// The plan of the one-kernel decode path (decode_split) where it runs, on a
// GPU of compute capability cc with sm_count SMs (0: unknown, listings
// without a GPU; taken as the H200's 132), else nothing; an error where it
// was asked for and cannot run, or an override of it cannot.
//
// Chosen where its units, (slot, slice of I), fill the SMs' waves to 90%
// or more (decode_split_plan picks the slice width for that): each CTA
// streams its units' weights alone, so an SM without a unit in the last
// wave leaves its share of the bandwidth unused; and only at 128 columns
// per slice, the one width measured to win. Measured on the H200
// (docs/perf/fused_moe.md, session 23): DeepSeek-V3 and Kimi-K2 T = 1 (128
// units on 132 SMs, 97%) take 173-174 us for the experts against 176-178
// for two launches; at 128 columns Qwen3-235B (96 units, 73%) 85 against
// 83 and Mixtral (224 units, 85% of two waves) 190 against 172.
//
// Keys are never ignored: the decode_split_* keys ask for this path (an
// error where it cannot run, or with decode_split=0), and grouped-GEMM keys
// (which this path, running no grouped GEMM, could not honour) keep the
// choice on the grouped-GEMM decode kernels, where they apply, and are an
// error with decode_split=1 or 2.
std::optional<DecodeSplitPlan> split_path(const FusedMoeArgs& a, const Dims& d, const FusedMoeOptions& o, int cc,
                                          int sm_count) {
  std::string split_keys;
  for (const auto& [name, set] : {std::pair<const char*, bool>{"decode_split_cols", o.decode_split_cols != 0},
                                  {"decode_split_box_rows", o.decode_split_box_rows != 0},
                                  {"decode_split_pool", o.decode_split_pool != -1}})
    if (set) split_keys += fmt::format("{}{}", split_keys.empty() ? "" : ", ", name);
  std::string gemm_keys = moe_grouped_gemm_overrides(o.gate_up, "gate_up_");
  if (const std::string down = moe_grouped_gemm_overrides(o.down, "down_"); !down.empty())
    gemm_keys += (gemm_keys.empty() ? "" : ", ") + down;
  if (o.decode_split == 0) {
    TC_CHECK_ARG(split_keys.empty(), kOp, "decode_split",
                 "1, 2 or -1 where decode_split_* keys are given (they tune the one-kernel decode path)",
                 "decode_split=0 with " + split_keys);
    return std::nullopt;
  }
  const bool choose = o.decode_split < 0 && split_keys.empty();
  if (choose) {
    if (!decode_path(a, d, o) || !decode_split_blocker(a, d.T, d.H, d.I, cc).empty() || !gemm_keys.empty())
      return std::nullopt;
  } else {
    const std::string asked = o.decode_split > 0 ? "" : " (asked for by " + split_keys + ")";
    TC_CHECK_ARG(decode_path(a, d, o), kOp, "decode_split", "the decode path (decode=1, or chosen at decode sizes)",
                 "the mapped path" + asked);
    const std::string why = decode_split_blocker(a, d.T, d.H, d.I, cc);
    TC_CHECK_ARG(why.empty(), kOp, "decode_split",
                 "T = 1 on sm_90 with stacked [N, K] weights, H a multiple of 8 up to 8192 and I with a slice width",
                 why + asked);
    TC_CHECK_ARG(gemm_keys.empty(), kOp, "decode_split",
                 "no grouped-GEMM keys on the one-kernel decode path (it runs no grouped GEMM; its own keys are "
                 "decode_split_cols, decode_split_box_rows and decode_split_pool)",
                 gemm_keys + asked);
  }
  DecodeSplitPlan plan = decode_split_plan(d.K, d.H, d.I, sm_count, o.decode_split_cols, o.decode_split_box_rows,
                                           o.decode_split_pool, o.decode_split == 2);
  if (choose && !(plan.cols == 128 && plan.fill >= 0.9)) return std::nullopt;
  return plan;
}

// Gate and mapping in one launch (when both run): asked for, within the
// fused kernel's register budget, and where the mapping runs on one block
// (its last block builds the layout; many slots spread over several).
bool fused_gate_mapping(const FusedMoeOptions& o, const Dims& d, int sm_count) {
  return o.fuse_gate_mapping && moe_topk_gate_mapping_fits(d.E, d.K) &&
         moe_fused_mapping_blocks(d.T * d.K, o.mapping_blocks, sm_count) == 1;
}

}  // namespace

FusedMoeWorkspace::~FusedMoeWorkspace() {
  if (ptr_) rt::driver().cuMemFree(ptr_);  // no throw from a destructor
}

CUdeviceptr FusedMoeWorkspace::reserve(size_t bytes, int device) {
  if (bytes <= bytes_ && device == device_) return ptr_;
  if (ptr_) {
    // Earlier calls may still use the old buffer: wait on its own GPU (the
    // new call's may be another one).
    const rt::ContextScope old(device_);
    TC_DRV(cuCtxSynchronize);
    TC_DRV(cuMemFree, ptr_);
    ptr_ = 0, bytes_ = 0;
  }
  rt::ensure_context(device);
  TC_DRV(cuMemAlloc, &ptr_, std::max<size_t>(bytes, 256));
  bytes_ = bytes, device_ = device;
  return ptr_;
}

namespace {
// The layer's own config keys: where each goes, its range and what its
// error message expects (the keys' meanings: FusedMoeOptions).
struct LayerKey {
  const char* name;
  int FusedMoeOptions::*field;
  int lo, hi, multiple;
  std::string expected;
};

const std::vector<LayerKey>& layer_keys() {
  static const std::vector<LayerKey> keys = {
      {"mapping_blocks", &FusedMoeOptions::mapping_blocks, 0, kMoeFusedMappingMaxBlocks, 1,
       fmt::format("mapping_blocks 0 (choose), 1 (one block) or up to {} blocks", kMoeFusedMappingMaxBlocks)},
      {"gate_tokens_per_block", &FusedMoeOptions::gate_tokens_per_block, 0, kMoeTopkGateMappingMaxTokensPerBlock, 1,
       fmt::format("gate_tokens_per_block 0 (choose) or 1..{}", kMoeTopkGateMappingMaxTokensPerBlock)},
      {"decode", &FusedMoeOptions::decode, -1, 1, 1, "decode 0 (mapped path), 1 (decode path) or -1 (choose)"},
      {"decode_split", &FusedMoeOptions::decode_split, -1, 2, 1,
       "decode_split 0 (two launches), 1 (one kernel + combine), 2 (the same, its work split evenly over every SM) "
       "or -1 (choose)"},
      {"decode_split_cols", &FusedMoeOptions::decode_split_cols, 0, tc::moe::kSplitMaxCols, 8,
       fmt::format("decode_split_cols 0 (choose) or a multiple of 8 up to {}", tc::moe::kSplitMaxCols)},
      {"decode_split_box_rows", &FusedMoeOptions::decode_split_box_rows, 0, tc::moe::kSplitMaxBoxRows, 8,
       fmt::format("decode_split_box_rows 0 (choose) or a multiple of 8 up to {}", tc::moe::kSplitMaxBoxRows)},
      {"decode_split_pool", &FusedMoeOptions::decode_split_pool, -1, INT_MAX, 1,
       "decode_split_pool -1 (choose), 0 (no pool) or down boxes per unit"},
      {"fused_combine", &FusedMoeOptions::fused_combine, -1, 1, 1,
       "fused_combine 0 (moe_reduce_fused after the down projection), 1 (fused into it) or -1 (choose)"},
      {"router_split", &FusedMoeOptions::router_split, -1, 0, 1,
       "router_split 0 (the grouped GEMM's own choice) or -1 (choose: spread the router GEMM over the SMs)"},
  };
  return keys;
}
}  // namespace

FusedMoeOptions fused_moe_options(const std::map<std::string, int>& config, const char* arg) {
  FusedMoeOptions m;
  const auto& keys = layer_keys();
  for (auto& [k, v] : config) {
    const auto own = std::find_if(keys.begin(), keys.end(), [&](const LayerKey& l) { return k == l.name; });
    if (own != keys.end()) {
      TC_CHECK_ARG(v >= own->lo && v <= own->hi && v % own->multiple == 0, kOp, arg, own->expected,
                   std::to_string(v));
      m.*(own->field) = v;
    } else if (k.rfind("router_", 0) == 0) {
      if (!m.router) m.router.emplace();
      set_config_key(*m.router, k.substr(7), v, kOp, arg);
    } else if (k.rfind("gate_up_", 0) == 0) {
      set_config_key(m.gate_up, k.substr(8), v, kOp, arg);
    } else if (k.rfind("down_", 0) == 0) {
      set_config_key(m.down, k.substr(5), v, kOp, arg);
    } else {
      std::string names;
      for (const LayerKey& l : keys) names += std::string(l.name) + ", ";
      TC_CHECK_ARG(is_moe_grouped_gemm_config_key(k), kOp, arg,
                   fmt::format("keys {}or a grouped GEMM key ({}) for both projections, or one prefixed gate_up_ or "
                               "down_ for one, or router_ for the router GEMM",
                               names, moe_grouped_gemm_config_keys()),
                   "'" + k + "'");
      set_config_key(m.gate_up, k, v, kOp, arg), set_config_key(m.down, k, v, kOp, arg);
    }
  }
  return m;
}

void validate_fused_moe(const FusedMoeArgs& a, const FusedMoeParams& p, DeviceType backend) {
  const Device on = tensors_device(backend, a.x);  // every tensor must be on it
  check_tensor(a.x, kOp, "x", {DType::kF16, DType::kBF16}, 2, on);
  const DType dt = a.x.dtype;
  check_tensor(a.w_router, kOp, "w_router", {dt}, 2, on);
  const int64_t T = a.x.shape[0], H = a.x.shape[1], E = a.w_router.shape[0];
  TC_CHECK_ARG(H >= 1, kOp, "x", "H >= 1 columns", a.x.describe());
  TC_CHECK_ARG(a.w_router.shape[1] == H, kOp, "w_router", fmt::format("[E, H] with H = {} (columns of x)", H),
               a.w_router.describe());
  TC_CHECK_ARG(E >= 1, kOp, "w_router", "at least one expert", a.w_router.describe());
  TC_CHECK_ARG(p.top_k >= 1 && p.top_k <= std::min<int64_t>(E, kMaxTopK), kOp, "top_k",
               fmt::format("1..{} (experts, at most {})", std::min<int64_t>(E, kMaxTopK), kMaxTopK),
               std::to_string(p.top_k));
  check_expert_set(a.w_gate, "w_gate", E, dt, on);
  check_expert_set(a.w_up, "w_up", E, dt, on);
  check_expert_set(a.w_down, "w_down", E, dt, on);
  const Dims d = dims_of(a, p);
  const bool kn = a.w_gate.layout == WeightLayout::kKN;
  const auto gate_want = kn ? std::pair{H, d.I} : std::pair{d.I, H};
  const auto down_want = kn ? std::pair{d.I, H} : std::pair{H, d.I};
  auto shape_str = [](std::pair<int64_t, int64_t> s) { return fmt::format("[{}, {}]", s.first, s.second); };
  TC_CHECK_ARG(expert_shape(a.w_gate) == gate_want, kOp, "w_gate",
               fmt::format("{} per expert ({} layout, H = {})", shape_str(gate_want), weight_layout_name(a.w_gate.layout), H),
               shape_str(expert_shape(a.w_gate)));
  TC_CHECK_ARG(a.w_up.layout == a.w_gate.layout && expert_shape(a.w_up) == gate_want, kOp, "w_up",
               fmt::format("{} per expert in the {} layout (as w_gate)", shape_str(gate_want),
                           weight_layout_name(a.w_gate.layout)),
               fmt::format("{} in the {} layout", shape_str(expert_shape(a.w_up)), weight_layout_name(a.w_up.layout)));
  // One grouped GEMM reads gate and up, stepping both by one expert stride
  // (views w13[:, :I] and w13[:, I:] of a fused [E, 2I, H] tensor share it).
  TC_CHECK_ARG(a.w_up.expert_stride() == a.w_gate.expert_stride(), kOp, "w_up",
               fmt::format("the expert stride of w_gate ({} elements)", a.w_gate.expert_stride()),
               fmt::format("{} elements", a.w_up.expert_stride()));
  TC_CHECK_ARG(a.w_down.layout == a.w_gate.layout && expert_shape(a.w_down) == down_want, kOp, "w_down",
               fmt::format("{} per expert in the {} layout (as w_gate)", shape_str(down_want),
                           weight_layout_name(a.w_gate.layout)),
               fmt::format("{} in the {} layout", shape_str(expert_shape(a.w_down)),
                           weight_layout_name(a.w_down.layout)));
  check_tensor(a.out, kOp, "out", {dt}, Shape{T, H}, on);
  if (a.bias) check_tensor(*a.bias, kOp, "bias", {DType::kF32}, Shape{E}, on);
  if (a.ids) check_tensor(*a.ids, kOp, "ids", {DType::kI32}, Shape{T, p.top_k}, on);
  if (a.weights) check_tensor(*a.weights, kOp, "weights", {DType::kF32}, Shape{T, p.top_k}, on);
  if (p.given_routing)
    TC_CHECK_ARG(a.ids && a.weights, kOp, "ids", "ids and weights tensors [T, K] when the routing is given",
                 a.ids ? "no weights" : "no ids");
  // Routing parameters, with this op's name on the message.
  if (p.gate.mode == GateMode::kSigmoidGroupedTopk) {
    TC_CHECK_ARG(p.gate.n_group >= 1 && E % p.gate.n_group == 0, kOp, "n_group",
                 fmt::format("a divisor of E = {}", E), std::to_string(p.gate.n_group));
    TC_CHECK_ARG(p.gate.topk_group >= 1 && p.gate.topk_group <= p.gate.n_group, kOp, "topk_group",
                 fmt::format("1..n_group ({})", p.gate.n_group), std::to_string(p.gate.topk_group));
  } else {
    TC_CHECK_ARG(!a.bias, kOp, "bias", "no correction bias in softmax_topk routing", a.bias->describe());
  }
  if (backend == DeviceType::kCUDA) {
    const int dev = a.x.device.index;
    auto same = [&](const TensorView& t, const std::string& arg) {
      TC_CHECK_ARG(t.device.index == dev, kOp, arg, fmt::format("a tensor on cuda:{} (where x is)", dev),
                   t.describe());
    };
    same(a.w_router, "w_router");
    same(a.out, "out");
    if (a.bias) same(*a.bias, "bias");
    if (a.ids) same(*a.ids, "ids");
    if (a.weights) same(*a.weights, "weights");
  }
}

bool fused_moe_uses_decode(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o) {
  validate_fused_moe(a, p, DeviceType::kCUDA);
  return decode_path(a, dims_of(a, p), o);
}

bool fused_moe_uses_decode_split(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o,
                                 int cc_major, int sm_count) {
  validate_fused_moe(a, p, DeviceType::kCUDA);
  const int dev = a.x.device.index;
  return split_path(a, dims_of(a, p), o, listing_cc_major(cc_major, dev), sm_count > 0 ? sm_count : sm_count_if_gpu(dev))
      .has_value();
}

namespace {
// Runs f, one projection's config or launch: an argument error from the
// grouped GEMM gains the projection and its config prefix, so the layer's
// user knows which key to change (e.g. bulk=1 where down has no per-row
// schedule is down_bulk's business).
enum class LayerGemm { kRouter, kGateUp, kDown };

template <typename F>
auto in_gemm(LayerGemm g, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    const char* what = g == LayerGemm::kRouter   ? "the router GEMM (config keys router_KEY)"
                       : g == LayerGemm::kGateUp ? "the gate/up projection (config keys gate_up_KEY or KEY)"
                                                 : "the down projection (config keys down_KEY or KEY)";
    throw Error(e.kind(), fmt::format("{}: {}: {}", kOp, what, e.what()));
  }
}

template <typename F>
auto in_projection(bool gate_up, F&& f) {
  return in_gemm(gate_up ? LayerGemm::kGateUp : LayerGemm::kDown, std::forward<F>(f));
}

// The decode path's gate/up overrides: where the down projection's combine
// kernel preloads its first item's weights (down_preload=1), the gate/up
// kernel before it prefers the most shared memory too, so
// the preloading CTAs need no SM to drain and reconfigure before they can be
// resident (session 30: the carveout on both kernels took back half of what
// the preload alone cost the layer).
MoeGroupedGemmConfig decode_gate_up_config(const MoeGroupedGemmArgs& down, const FusedMoeOptions& o, int cc_major,
                                           int sm_count) {
  MoeGroupedGemmConfig g = o.gate_up;
  // (The preload runs only when asked for, so the down projection's config
  // is resolved here only then: not on every decode call.)
  if (g.carveout == -1 && o.down.preload == 1 &&
      in_projection(false, [&] { return moe_grouped_gemm_config(down, o.down, cc_major, sm_count); }).preload == 1)
    g.carveout = 1;
  return g;
}

// The layer's tile height on a GPU of compute capability cc_major.
int layer_block_m(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o, int cc_major) {
  if (o.gate_up.block_m) return o.gate_up.block_m;
  const Dims d = dims_of(a, p);
  const bool wgmma = cc_major == 9 && d.H % 8 == 0 && d.I % 8 == 0;
  return moe_grouped_gemm_block_m(double(d.T * d.K) / double(d.E), wgmma);
}
}  // namespace

int fused_moe_block_m(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o) {
  return layer_block_m(a, p, o, cc_major_if_gpu(a.x.device.index));
}

MoeGroupedGemmConfig fused_moe_router_config(const FusedMoeArgs& a, const FusedMoeParams& p,
                                             const FusedMoeOptions& o, int sm_count, int cc_major) {
  const Dims d = dims_of(a, p);
  const int dev = a.x.device.index, cc = listing_cc_major(cc_major, dev);
  size_t bytes = 0;  // stand-in buffers, 256-byte aligned like the workspace's
  const Buffers b = carve(a, d, layer_block_m(a, p, o, cc), CUdeviceptr(1) << 20, &bytes);
  return router_config(router_args(a, b), d, o, cc, sm_count > 0 ? sm_count : sm_count_if_gpu(dev));
}

size_t fused_moe_workspace_bytes(const FusedMoeArgs& a, const FusedMoeParams& p, const FusedMoeOptions& o) {
  const Dims d = dims_of(a, p);
  const int dev = a.x.device.index, sms = sm_count_if_gpu(dev);
  const auto split = split_path(a, d, o, listing_cc_major(0, dev), sms);
  size_t bytes = 0;
  carve(a, d, fused_moe_block_m(a, p, o), 0, &bytes, split ? split->workspace_bytes : 0);
  return bytes;
}

std::vector<jit::KernelSpec> fused_moe_kernel_specs(const FusedMoeArgs& a, const FusedMoeParams& p,
                                                    const FusedMoeOptions& o, int cc_major, int sm_count) {
  validate_fused_moe(a, p, DeviceType::kCUDA);
  const Dims d = dims_of(a, p);
  if (d.T == 0) return {};
  size_t bytes = 0;
  const int cc = listing_cc_major(cc_major, a.x.device.index);
  const int64_t bm = layer_block_m(a, p, o, cc);
  // Stand-in addresses: 256-byte aligned like real allocations.
  const Buffers b = carve(a, d, bm, CUdeviceptr(1) << 20, &bytes);
  std::vector<jit::KernelSpec> specs;
  const int sms = sm_count > 0 ? sm_count : sm_count_if_gpu(a.x.device.index);  // split-K choices depend on it
  auto add_gemm = [&](const MoeGroupedGemmArgs& args, const MoeGroupedGemmConfig& over) {
    const MoeGroupedGemmConfig c = moe_grouped_gemm_config(args, over, cc, sms);
    for (auto& s : moe_grouped_gemm_kernel_specs(args, c)) specs.push_back(s);
  };
  auto add_projection = [&](bool gate_up, const MoeGroupedGemmArgs& args, const MoeGroupedGemmConfig& over) {
    in_projection(gate_up, [&] { add_gemm(args, over); });
  };
  in_gemm(LayerGemm::kRouter, [&] {
    const MoeGroupedGemmArgs ra = router_args(a, b);
    add_gemm(ra, router_config(ra, d, o, cc, sms));
  });
  MoeTopkGateArgs g{b.logits, a.bias, b.ids, b.weights};
  const auto split = split_path(a, d, o, cc, sms);  // before the branch: decode_split=1 off the decode path is an error
  if (decode_path(a, d, o)) {
    if (!p.given_routing) specs.push_back(moe_topk_gate_kernel_spec(g, p.gate));
    if (split) {
      for (auto& s : decode_split_kernel_specs(a.x.dtype, a.out.dtype, split->cols, split->balanced))
        specs.push_back(s);
      return specs;
    }
    const MoeGroupedGemmArgs down = decode_down_args(a, b, d);
    add_projection(true, decode_gate_up_args(a, b, d), decode_gate_up_config(down, o, cc, sms));
    add_projection(false, down, o.down);
    return specs;
  }
  if (!p.given_routing && fused_gate_mapping(o, d, sms)) specs.push_back(moe_topk_gate_mapping_kernel_spec(g, p.gate));
  specs.push_back(moe_topk_gate_kernel_spec(g, p.gate));  // stage timings run the two alone
  if (moe_fused_mapping_blocks(d.T * d.K, o.mapping_blocks, sms) == 1) specs.push_back(moe_fused_mapping_kernel_spec());
  else for (auto& s : moe_fused_mapping_block_kernel_specs()) specs.push_back(s);
  add_projection(true, gate_up_args(a, b), o.gate_up);
  add_projection(false, down_args(a, b, o.down), o.down);
  MoeReduceFusedArgs rf;
  rf.x = b.y;
  rf.token_topk_to_pos = b.slot_pos;
  rf.topk_weights = b.weights;
  rf.out = a.out;
  specs.push_back(moe_reduce_fused_config(rf, {}).kernel_spec());
  return specs;
}

void fused_moe(const FusedMoeArgs& a, const FusedMoeParams& p, CUstream stream, FusedMoeWorkspace* ws,
               const FusedMoeOptions& o) {
  validate_fused_moe(a, p, DeviceType::kCUDA);
  const Dims d = dims_of(a, p);
  if (d.T == 0) return;
  const DeviceCall call(a.x.device, stream, kOp);
  const int dev = a.x.device.index;
  const rt::DeviceInfo info = rt::device_info(dev);  // one lookup (a copy under a lock) per call
  const int64_t bm = layer_block_m(a, p, o, info.cc_major);
  const auto split = split_path(a, d, o, info.cc_major, info.sm_count);
  const size_t split_bytes = split ? split->workspace_bytes : 0;
  size_t bytes = 0;
  carve(a, d, bm, 0, &bytes, split_bytes);
  std::optional<rt::ScratchBuffer> scratch;
  CUdeviceptr base = 0;
  if (ws) {
    base = ws->reserve(bytes, dev);
  } else {
    scratch.emplace(bytes, stream);
    base = scratch->get();
  }
  const Buffers b = carve(a, d, bm, base, &bytes, split_bytes);

  auto options = [&](const MoeGroupedGemmConfig& config) {
    MoeGroupedGemmOptions go;
    go.compile = o.compile;
    go.config = config;
    return go;
  };
  // One projection with its config overrides; its argument errors name it.
  auto project = [&](bool gate_up, const MoeGroupedGemmArgs& args) {
    in_projection(gate_up, [&] { moe_grouped_gemm(args, stream, options(gate_up ? o.gate_up : o.down)); });
  };
  const bool route = !p.given_routing;
  if (route && runs(o, FusedMoeStage::kRouter))
    in_gemm(LayerGemm::kRouter, [&] {
      const MoeGroupedGemmArgs ra = router_args(a, b);
      moe_grouped_gemm(ra, stream, options(router_config(ra, d, o, info.cc_major, info.sm_count)));
    });
  const MoeTopkGateArgs gate_args{b.logits, a.bias, b.ids, b.weights};
  if (decode_path(a, d, o)) {  // gate, gate/up, down + combine
    if (route && runs(o, FusedMoeStage::kGate)) moe_topk_gate(gate_args, p.gate, stream, o.compile);
    if (split) {  // the streaming kernel is the gate/up stage, the combine the down stage
      decode_split(a, b.ids, b.weights, b.partial, *split, stream, o.compile, runs(o, FusedMoeStage::kGateUp),
                   runs(o, FusedMoeStage::kDown));
      return;
    }
    const MoeGroupedGemmArgs down = decode_down_args(a, b, d);
    if (runs(o, FusedMoeStage::kGateUp))
      in_projection(true, [&] {
        moe_grouped_gemm(decode_gate_up_args(a, b, d), stream,
                         options(decode_gate_up_config(down, o, info.cc_major, info.sm_count)));
      });
    if (runs(o, FusedMoeStage::kDown)) project(false, down);
    return;
  }
  const MoeFusedMappingArgs mapping{b.ids, b.counts, b.offsets, b.slot_pos, b.pos_to_token, b.tile_expert, b.num_tiles};
  const MoeFusedMappingParams mp{int(d.E), int(bm), o.mapping_blocks};
  const bool gate = route && runs(o, FusedMoeStage::kGate), map = runs(o, FusedMoeStage::kMapping);
  if (gate && map && fused_gate_mapping(o, d, info.sm_count)) {
    moe_topk_gate_mapping(gate_args, p.gate, mapping, mp, stream, o.compile, o.gate_tokens_per_block);
  } else {
    if (gate) moe_topk_gate(gate_args, p.gate, stream, o.compile);
    if (map) moe_fused_mapping(mapping, mp, stream, o.compile);
  }
  const bool fused = fuse_combine(a, b, d, o, info.cc_major, info.sm_count);
  if (runs(o, FusedMoeStage::kGateUp)) project(true, gate_up_args(a, b));
  if (runs(o, FusedMoeStage::kDown)) {
    MoeGroupedGemmArgs g = down_args(a, b, o.down);
    if (fused) g.combine_into = MoeGroupedGemmArgs::CombineInto{b.slot_pos, b.weights, b.pos_to_token, a.out};
    project(false, g);
  }
  if (runs(o, FusedMoeStage::kCombine) && !fused) {
    MoeReduceFusedArgs rf;
    rf.x = b.y;
    rf.token_topk_to_pos = b.slot_pos;
    rf.topk_weights = b.weights;
    rf.out = a.out;
    MoeReduceFusedOptions ro;
    ro.compile = o.compile;
    moe_reduce_fused(rf, stream, ro);
  }
}

void fused_moe_cpu(const FusedMoeArgs& a, const FusedMoeParams& p) {
  validate_fused_moe(a, p, DeviceType::kCPU);
  const Dims d = dims_of(a, p);
  auto floats = [](const TensorView& t) {
    std::vector<float> v(size_t(t.numel()));
    load_row_f32(t.data, t.dtype, 0, t.numel(), v.data());
    return v;
  };
  const auto x = floats(a.x), wr = floats(a.w_router);
  const auto bias = a.bias ? floats(*a.bias) : std::vector<float>();
  std::vector<float> out(size_t(d.T * d.H));
  std::vector<int32_t> ids(size_t(d.T * d.K));
  std::vector<float> w(size_t(d.T * d.K));
  reference::FusedMoeRef r{x.data(), wr.data(), nullptr, nullptr, nullptr, a.bias ? bias.data() : nullptr,
                           out.data(), ids.data(), w.data(), d.T, d.H, d.I, d.E, d.K};
  r.sigmoid_grouped = p.gate.mode == GateMode::kSigmoidGroupedTopk;
  r.renormalize = p.gate.renormalize;
  r.n_group = p.gate.n_group;
  r.topk_group = p.gate.topk_group;
  r.scale = p.gate.scale;
  r.round_scores = score_rounding(p.gate.score_dtype);
  r.act = a.x.dtype;
  if (p.given_routing) {
    std::copy(a.ids->ptr<int32_t>(), a.ids->ptr<int32_t>() + d.T * d.K, ids.begin());
    std::copy(a.weights->ptr<float>(), a.weights->ptr<float>() + d.T * d.K, w.begin());
  } else {
    reference::fused_moe_route(r, ids.data(), w.data());
  }
  r.given_routing = true;  // routed above: the golden runs the experts only

  // Only the routed experts' matrices, as fp32 in nn.Linear ([out, in])
  // order, packed: a decode step of a 256-expert model converts 8, not 256
  // (the fp32 stacks of every expert of DeepSeek-V3 would take 45 GB).
  std::vector<char> hit(size_t(d.E), 0);
  for (int32_t e : ids)
    if (e >= 0 && e < d.E) hit[size_t(e)] = 1;  // ids outside [0, E) are dropped slots
  std::vector<int64_t> slot(size_t(d.E), -1), routed;
  for (int64_t e = 0; e < d.E; ++e)
    if (hit[size_t(e)]) {
      slot[size_t(e)] = int64_t(routed.size());
      routed.push_back(e);
    }
  auto pack = [&](const ExpertWeights& wt, int64_t out_dim, int64_t in_dim) {
    const auto base = grouped_gemm::bases(wt);
    const auto load = reference::weights_from_memory(base.data(), nullptr, a.x.dtype, wt.layout == WeightLayout::kKN,
                                                     out_dim, in_dim);
    std::vector<float> s(routed.size() * size_t(out_dim * in_dim));
    parallel_for(int64_t(routed.size()), out_dim * in_dim, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) load(routed[size_t(i)], 0, s.data() + size_t(i * out_dim * in_dim));
    });
    return s;
  };
  const auto wg = pack(a.w_gate, d.I, d.H), wu = pack(a.w_up, d.I, d.H), wd = pack(a.w_down, d.H, d.I);
  r.w_gate = wg.data();
  r.w_up = wu.data();
  r.w_down = wd.data();
  r.expert_slot = slot.data();
  reference::fused_moe(r);
  store_row_f32(a.out.data, a.out.dtype, 0, int64_t(out.size()), out.data());
  if (a.ids && !p.given_routing) std::copy(ids.begin(), ids.end(), a.ids->ptr<int32_t>());
  if (a.weights && !p.given_routing) std::copy(w.begin(), w.end(), a.weights->ptr<float>());
}

std::pair<TensorView, TensorView> gate_up_views(const TensorView& w13) {
  TC_CHECK_ARG(w13.ndim() == 3 && w13.shape[1] % 2 == 0, kOp, "w13", "a fused gate/up tensor [E, 2I, H]",
               w13.describe());
  const int64_t E = w13.shape[0], I = w13.shape[1] / 2, H = w13.shape[2];
  const Shape shape{E, I, H}, strides{w13.strides[0], w13.strides[1], w13.strides[2]};
  const TensorView gate(w13.data, w13.dtype, shape, strides, w13.device);
  const TensorView up(static_cast<char*>(w13.data) + I * w13.strides[1] * int64_t(dtype_size(w13.dtype)), w13.dtype,
                      shape, strides, w13.device);
  return {gate, up};
}

}  // namespace tilecraft::ops
