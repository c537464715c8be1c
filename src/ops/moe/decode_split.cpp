#include "ops/moe/decode_split.h"

#include <algorithm>

#include "moe/decode_split_params.cuh"
#include "ops/moe/launch_counters.h"
#include "ops/moe/moe_grouped_gemm_common.h"
#include "ops/moe/tma_map.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {

constexpr int64_t kSmemBudget = 216 * 1024;  // as the bulk decode kernels: room for the next kernel's CTA
constexpr int64_t kMinAutoCols = 32;         // narrower slices make down-box rows under 64 bytes

// x's bytes rounded to 1 KB (the ring starts there), as the kernel's ring_offset.
int64_t ring_offset_bytes(int64_t H) { return (H * 2 + 1023) / 1024 * 1024; }

int stages_for(int64_t H, int64_t stage_bytes) {
  return int(std::clamp<int64_t>((kSmemBudget - ring_offset_bytes(H)) / stage_bytes, 0, tc::moe::kSplitMaxStages));
}

// The fewest box rows (a multiple of 8) whose stage of W columns holds one
// gate/up piece: the gate and up rows of one column, 4 H bytes.
int64_t min_box_rows(int64_t H, int64_t W) { return ((H * 4 + 2 * W - 1) / (2 * W) + 7) / 8 * 8; }

// Whether slices of W columns can run at H (a box of at most 256 rows holds
// a gate/up column pair, and two stages fit beside x).
bool cols_fit(int64_t H, int64_t W) {
  const int64_t rows = min_box_rows(H, W);
  return rows <= tc::moe::kSplitMaxBoxRows && stages_for(H, rows * W * 2) >= 2;
}

// The share of the SMs' waves that `units` CTAs' worth of units fill.
double wave_fill(int64_t units, int64_t sms) {
  const int64_t waves = (units + sms - 1) / sms;
  return double(units) / double(waves * sms);
}

// Why no slice width runs I at H ("" when one does).
std::string width_blocker(int64_t H, int64_t I) {
  for (int64_t W = tc::moe::kSplitMaxCols; W >= 8; W -= 8)
    if (I % W == 0 && cols_fit(H, W)) return "";
  return fmt::format("I = {} at H = {} (no slice width: a multiple of 8 up to {} dividing I, at least H / 128)", I, H,
                     tc::moe::kSplitMaxCols);
}

jit::KernelSpec spec(const char* function, std::vector<std::string> args, std::string config) {
  return jit::KernelSpec{"moe/decode_split.cuh", function, std::move(args), std::move(config), true};
}

}  // namespace

std::string decode_split_blocker(const FusedMoeArgs& a, int64_t T, int64_t H, int64_t I, int cc_major) {
  if (cc_major != 9) return fmt::format("sm_{}x (sm_90 only)", cc_major);
  if (T != 1) return fmt::format("T = {} (one token only)", T);
  if (!a.w_gate.stacked || !a.w_up.stacked || !a.w_down.stacked || a.w_gate.layout != WeightLayout::kNK)
    return "per-expert or [K, N] weights (stacked [E, N, K] only)";
  // Its bulk copies start at expert bases: 16-byte aligned bases and strides
  // (views of a fused w13 [E, 2I, H] have 2IH-element ones).
  for (const ExpertWeights* w : {&a.w_gate, &a.w_up, &a.w_down})
    if (!grouped_gemm::weights_aligned16(*w))
      return "stacked weights whose base or expert stride is not 16-byte aligned";
  if (H % 8 || H > 8192) return fmt::format("H = {} (a multiple of 8, at most 8192)", H);
  return width_blocker(H, I);
}

DecodeSplitPlan decode_split_plan(int64_t K, int64_t H, int64_t I, int sm_count, int cols, int box_rows, int pool,
                                  bool balanced) {
  const int64_t sms = sm_count > 0 ? sm_count : 132;
  DecodeSplitPlan plan;
  if (cols > 0) {
    TC_CHECK_ARG(cols % 8 == 0 && cols <= tc::moe::kSplitMaxCols && I % cols == 0 && cols_fit(H, cols), "fused_moe",
                 "decode_split_cols",
                 fmt::format("a multiple of 8 up to {} that divides I = {} and is at least H / 128 = {}",
                             tc::moe::kSplitMaxCols, I, (H + 127) / 128),
                 std::to_string(cols));
    plan.cols = cols;
  } else {
    // 128 columns (256-byte down-box rows) where they divide I: the one
    // width measured to beat the two launches (DeepSeek-V3 and Kimi-K2,
    // 128 units on 132 SMs). Elsewhere the width whose units fill the SMs'
    // waves best, the widest of equals (Qwen3-235B 96, Qwen3-30B 48, Mixtral
    // 112); fused_moe's default takes those only at 128 (see split_path).
    // Widths under 32 only where nothing wider divides I.
    double best = -1;
    for (int64_t W = tc::moe::kSplitMaxCols; W >= 8; W -= 8) {
      if (I % W || !cols_fit(H, W) || (W < kMinAutoCols && plan.cols)) continue;
      const double fill = wave_fill(K * (I / W), sms);
      if (fill > best + 1e-9) best = fill, plan.cols = int(W);
      if (W == tc::moe::kSplitMaxCols) break;
    }
    TC_CHECK_ARG(plan.cols > 0, "fused_moe", "decode_split", "a slice width for I and H", width_blocker(H, I));
  }
  const int64_t W = plan.cols;
  if (box_rows > 0) {
    TC_CHECK_ARG(box_rows % 8 == 0 && box_rows >= min_box_rows(H, W) && box_rows <= tc::moe::kSplitMaxBoxRows &&
                     stages_for(H, int64_t(box_rows) * W * 2) >= 2,
                 "fused_moe", "decode_split_box_rows",
                 fmt::format("a multiple of 8 in [{}, {}] at H = {} and {} columns per slice (a stage holds a "
                             "gate/up column pair, two stages fit)",
                             min_box_rows(H, W), tc::moe::kSplitMaxBoxRows, H, W),
                 std::to_string(box_rows));
    plan.box_rows = box_rows;
  } else {
    // Stages of about 32 KB holding whole gate/up pieces: as many rows as
    // the largest piece that fits 32 KB (H = 7168: one column pair, 28 KB,
    // so 112 rows of 256 bytes and seven stages, not 128 rows, six stages
    // and 4 KB idle in each gate/up stage), at most 256 rows.
    const int64_t pair_cols = std::max<int64_t>(1, 32 * 1024 / (4 * H));
    plan.box_rows = int(std::clamp<int64_t>(((pair_cols * 4 * H + 2 * W - 1) / (2 * W) + 7) / 8 * 8,
                                            min_box_rows(H, W), tc::moe::kSplitMaxBoxRows));
  }
  const int64_t stage = int64_t(plan.box_rows) * W * 2;
  plan.stages = stages_for(H, stage);
  plan.gu_cols = int(std::clamp<int64_t>(stage / (4 * H), 1, 64));
  plan.slices = int(I / W);
  plan.units = K * plan.slices;
  plan.fill = wave_fill(plan.units, sms);
  plan.boxes = int((H + plan.box_rows - 1) / plan.box_rows);
  // The pool: equal units still finish apart, so the last boxes of every
  // unit may go to whichever CTA is free. Per-CTA traces with SM ids (H200,
  // session 26) show the spread is where a CTA runs: the same ~40 SMs end
  // ~165-170 us and ~10 others ~143-150 in every run and model, and a pool
  // of 8 of 64 boxes ends every CTA within 162.6-166.1 us. By default
  // (pool < 0) an eighth of the boxes: DeepSeek-V3 and Kimi-K2 experts
  // 173.6-174.7 us against 174.9-175.6 without (three rounds each; a tie on
  // a second board; session 23: 173.8-174.6 against 174.8-175.4); 4 boxes
  // lose 1 us, 16 lose 2, 32 lose 6. Other box counts (H != 7168) are not
  // measured. Claims count in 16 bits. A unit keeps one box at least: its
  // own boxes order the h buffer's reuse (the pieces of the CTA's unit two
  // further on wait for them), and so the counts that tell a unit's last
  // gate/up piece.
  const int64_t max_pool = std::min<int64_t>(plan.boxes - 1, (65535 - 1024) / std::max<int64_t>(plan.units, 1));
  if (pool >= 0) {
    TC_CHECK_ARG(pool <= max_pool, "fused_moe", "decode_split_pool",
                 fmt::format("0 (no pool) .. {} down boxes per unit (it has {} and keeps one)", max_pool,
                             plan.boxes),
                 std::to_string(pool));
    plan.pool_boxes = pool;
  } else {
    plan.pool_boxes = int(std::min<int64_t>(plan.boxes / 8, max_pool));
  }
  plan.workspace_bytes = size_t(plan.units * (H + W)) * sizeof(float);
  plan.grid = std::clamp<int64_t>(plan.units, 1, sms);
  if (balanced) {
    // One CTA per SM, each with an even share of the columns and the boxes
    // (kernels/moe/decode_split_balanced.cuh); no pool.
    plan.balanced = true;
    plan.grid = sms;
    TC_CHECK_ARG(pool <= 0, "fused_moe", "decode_split_pool", "0 or -1 with decode_split=2 (no pool: the work is "
                 "split evenly already)", std::to_string(pool));
    plan.pool_boxes = 0;
    // Phase B reads full rows of the down matrix (bulk copies of
    // contiguous bytes, not W-column boxes): as many as fill a stage.
    const int64_t stage_elems = int64_t(plan.box_rows) * W;
    TC_CHECK_ARG(I <= stage_elems, "fused_moe", "decode_split",
                 fmt::format("2 only where a ring stage ({} elements) holds a full down row of I elements",
                             stage_elems),
                 fmt::format("2 with I = {}", I));
    plan.down_rows = int(std::min<int64_t>(stage_elems / I, H));
    TC_CHECK_ARG(K <= tc::moe::kSplitMaxSlots, "fused_moe", "decode_split",
                 fmt::format("2 only with at most {} slots (top_k)", tc::moe::kSplitMaxSlots),
                 fmt::format("2 with top_k = {}", K));
    const int64_t per_cta = (plan.units * W + sms - 1) / sms;
    TC_CHECK_ARG(per_cta <= tc::moe::kBalancedMaxCols, "fused_moe", "decode_split",
                 fmt::format("2 only where each SM takes at most {} columns of h", tc::moe::kBalancedMaxCols),
                 fmt::format("2 with {} columns per SM ({} slots x I = {} over {} SMs)", per_cta, K, I, sms));
  }
  return plan;
}

std::vector<jit::KernelSpec> decode_split_kernel_specs(DType act, DType out, int cols, bool balanced) {
  const std::string a = dtype_kernel_type(act), o = dtype_kernel_type(out);
  const std::string types = fmt::format("{}->{}", dtype_name(act), dtype_name(out));
  if (balanced)
    return {jit::KernelSpec{"moe/decode_split_balanced.cuh", "tc::moe::decode_split_balanced_kernel",
                            {a, o, std::to_string(cols)},
                            fmt::format("decode-split balanced over the SMs W={} {}", cols, types), true},
            spec("tc::moe::decode_split_combine_kernel", {a, o}, fmt::format("decode-split combine {}", types))};
  return {spec("tc::moe::decode_split_kernel", {a, o, std::to_string(cols)},
               fmt::format("decode-split one kernel per token W={} {}", cols, types)),
          spec("tc::moe::decode_split_combine_kernel", {a, o}, fmt::format("decode-split combine {}", types))};
}

void decode_split(const FusedMoeArgs& a, const TensorView& ids, const TensorView& weights, void* partial,
                  const DecodeSplitPlan& plan, CUstream stream, const jit::CompileOptions& compile, bool stream_part,
                  bool combine) {
  const int64_t H = a.x.shape[1], E = a.w_router.shape[0], K = ids.shape[1];
  const int64_t I = a.w_gate.stacked->shape[1];
  const int dev = a.x.device.index;
  const int64_t stage = int64_t(plan.box_rows) * plan.cols * 2;
  const int smem = int(ring_offset_bytes(H) + plan.stages * stage) + 1024;  // + alignment slack
  const uint64_t code = uint64_t(a.x.dtype) | uint64_t(a.out.dtype) << 8;
  static jit::OpKernelCache main_kernels, combine_kernels;
  const jit::Launchable& k = main_kernels.get(
      code | uint64_t(plan.cols) << 16 | uint64_t(plan.balanced) << 32, compile, dev,
      [&] { return decode_split_kernel_specs(a.x.dtype, a.out.dtype, plan.cols, plan.balanced)[0]; },
      [](const jit::Launchable& l) {
        TC_DRV(cuFuncSetAttribute, l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               int(kSmemBudget + 1024));
      });
  const jit::Launchable& kc = combine_kernels.get(code, compile, dev, [&] {
    return decode_split_kernel_specs(a.x.dtype, a.out.dtype, plan.cols)[1];
  });
  rt::ensure_context(dev);

  tc::moe::DecodeSplitLaunch L{};
  tc::moe::DecodeSplitParams& p = L.p;
  p.x = a.x.data;
  p.ids = ids.ptr<int>();
  p.scale = weights.ptr<float>();
  p.w_gate = a.w_gate.stacked->data;
  p.w_up = a.w_up.stacked->data;
  p.partial = static_cast<float*>(partial);
  p.out = a.out.data;
  p.H = int(H), p.I = int(I), p.S = int(K), p.E = int(E);
  p.slices = plan.slices;
  p.stages = plan.stages, p.box_rows = plan.box_rows, p.gu_cols = plan.gu_cols;
  p.pool_boxes = plan.pool_boxes;
  p.w_down = a.w_down.stacked->data;
  p.down_rows = plan.down_rows;
  p.gu_stride = a.w_gate.expert_stride();  // (w_up's is the same: the layer checks)
  p.down_stride = a.w_down.expert_stride();
  if (plan.pool_boxes > 0 || plan.balanced) {
    p.h_global = p.partial + plan.units * H;
    // The balanced kernel also keeps a column count per slot after the pair.
    p.sched = plan.balanced ? launch_counters(dev, stream, "fused_moe", unsigned(1 + (K + 1) / 2))
                            : launch_counter_pair(dev, stream, "fused_moe");
  }
  // The down weights [E, H, I]: dims (I, H, E), boxes of W columns x box_rows rows, unswizzled.
  const int64_t esz = int64_t(dtype_size(a.x.dtype));
  encode_tma_map(L.down, a.w_down.stacked->data, a.x.dtype, {I, H, E}, {I * esz, p.down_stride * esz},
                 {plan.cols, plan.box_rows}, false);
  if (stream_part) jit::launch(k, unsigned(plan.grid), 1, tc::moe::kSplitThreads, unsigned(smem), stream, &L);
  // The balanced kernel leaves one partial row per slot (its down items
  // span all of I): the combine adds the slots only.
  if (plan.balanced) p.slices = 1;
  if (combine)
    jit::launch(kc, unsigned((H + tc::moe::kCombineCols - 1) / tc::moe::kCombineCols), 1,
                tc::moe::kCombineThreads, unsigned(K * tc::moe::kCombineCols * sizeof(float)), stream, &p);
}

}  // namespace tilecraft::ops
