// moe_grouped_gemm: argument checks, kernel specs, the launch and the CPU
// path. The config (keys, tile heuristics, kernel choice) is in
// moe_grouped_gemm_config.cpp; what both read in moe_grouped_gemm_common.h.
#include "tilecraft/ops/moe_grouped_gemm.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>

#include "moe/grouped_gemm_params.cuh"
#include "moe/tile_order.cuh"
#include "ops/check.h"
#include "ops/moe/launch_counters.h"
#include "ops/moe/moe_grouped_gemm_common.h"
#include "ops/moe/tma_map.h"
#include "ops/moe/tma_map_table.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/ops/moe_reduce_fused.h"
#include "tilecraft/reference/fused_moe.h"
#include "tilecraft/reference/moe_grouped_gemm.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
using namespace grouped_gemm;

const char* weight_layout_name(WeightLayout l) { return l == WeightLayout::kNK ? "NK" : "KN"; }

void validate_moe_grouped_gemm(const MoeGroupedGemmArgs& a, DeviceType backend) {
  const Device on = tensors_device(backend, a.a);  // every tensor must be on it
  check_tensor(a.a, kOp, "a", {DType::kF16, DType::kBF16}, 2, on);
  const DType dt = a.a.dtype;
  const int64_t K = a.a.shape[1];
  check_tensor(a.out, kOp, "out", {dt, DType::kF32}, 2, on);
  TC_CHECK_ARG(a.combine >= 1 && a.combine <= 32, kOp, "combine", "1..32 rows summed per output row",
               std::to_string(a.combine));
  TC_CHECK_ARG(a.a_repeat >= 1 && a.a_repeat <= INT_MAX, kOp, "a_repeat", "1..2^31-1 layout rows per row of a",
               std::to_string(a.a_repeat));
  const int64_t M = layout_rows(a), N = a.out.shape[1];
  TC_CHECK_ARG(K >= 1 && K <= INT_MAX, kOp, "a", "K (columns) in 1..2^31-1", a.a.describe());
  TC_CHECK_ARG(N >= 1 && N <= INT_MAX && M <= INT_MAX && a.a.shape[0] <= INT_MAX, kOp, "out",
               "N >= 1 and fewer than 2^31 rows and columns", a.out.describe());
  check_weights(a.w, "w", dt, N, K, on);
  const int64_t E = a.w.num_experts();
  if (a.w_up) {
    check_weights(*a.w_up, "w_up", dt, N, K, on);
    TC_CHECK_ARG(a.w_up->num_experts() == E, kOp, "w_up", fmt::format("{} experts (as w)", E),
                 std::to_string(a.w_up->num_experts()));
    TC_CHECK_ARG(a.w_up->layout == a.w.layout && a.w_up->stacked.has_value() == a.w.stacked.has_value(), kOp, "w_up",
                 "the layout and form (stacked or per expert) of w",
                 fmt::format("{} {}", weight_layout_name(a.w_up->layout), a.w_up->stacked ? "stacked" : "per expert"));
    // The kernels step both matrices by one stride (w13[:, :I] and w13[:, I:] share theirs).
    TC_CHECK_ARG(a.w_up->expert_stride() == a.w.expert_stride(), kOp, "w_up",
                 fmt::format("the expert stride of w ({} elements)", a.w.expert_stride()),
                 fmt::format("{} elements", a.w_up->expert_stride()));
  }
  if (a.a_index) {
    check_tensor(*a.a_index, kOp, "a_index", {DType::kI32}, Shape{M}, on);
    TC_CHECK_ARG(a.a_repeat == 1, kOp, "a_repeat", "1 with an a_index", std::to_string(a.a_repeat));
  } else {
    const int64_t need = (M + a.a_repeat - 1) / a.a_repeat;
    TC_CHECK_ARG(a.a.shape[0] >= need, kOp, "a",
                 fmt::format("at least {} rows (M = {} layout rows, a_repeat {}, no a_index)", need, M, a.a_repeat),
                 a.a.describe());
  }
  if (a.tile_expert) {
    check_tensor(*a.tile_expert, kOp, "tile_expert", {DType::kI32}, 1, on);
    const int64_t tiles = a.tile_expert->shape[0];
    TC_CHECK_ARG(tiles >= 1 && M % tiles == 0, kOp, "tile_expert", fmt::format("[M / block_m] with M = {}", M),
                 a.tile_expert->describe());
    const int64_t bm = M / tiles;
    TC_CHECK_ARG(bm == 1 || bm == 16 || bm == 32 || bm == 64 || bm == 128, kOp, "tile_expert",
                 "a per-row schedule or one of 16-, 32-, 64- or 128-row tiles (M / len(tile_expert))",
                 fmt::format("{} rows per tile (M = {}, {} tiles)", bm, M, tiles));
    TC_CHECK_ARG(a.combine == 1 || bm == 1, kOp, "tile_expert",
                 fmt::format("a per-row schedule ([M] = [{}]) with combine {}", M, a.combine),
                 a.tile_expert->describe());
  } else {
    TC_CHECK_ARG(E == 1, kOp, "tile_expert", "a tile schedule when there is more than one expert",
                 fmt::format("none, with {} experts", E));
    TC_CHECK_ARG(a.combine == 1, kOp, "tile_expert", fmt::format("a per-row schedule with combine {}", a.combine),
                 "none");
  }
  if (a.combine > 1) {
    TC_CHECK_ARG(!a.w_up, kOp, "w_up", "none with combine (a plain projection)", "a gated pair");
    TC_CHECK_ARG(!a.num_tiles, kOp, "num_tiles", "none with combine (every row of the schedule is live)",
                 a.num_tiles->describe());
  }
  if (a.num_tiles) check_tensor(*a.num_tiles, kOp, "num_tiles", {DType::kI32}, Shape{1}, on);
  if (a.row_scale) check_tensor(*a.row_scale, kOp, "row_scale", {DType::kF32}, Shape{M}, on);
  if (a.row_token) check_tensor(*a.row_token, kOp, "row_token", {DType::kI32}, Shape{M}, on);
  if (a.tile_fill) check_tensor(*a.tile_fill, kOp, "tile_fill", {DType::kI32}, Shape{M}, on);
  if (a.combine_into) {
    const auto& ci = *a.combine_into;
    check_tensor(ci.pos, kOp, "combine_into.pos", {DType::kI32}, 2, on);
    const int64_t T = ci.pos.shape[0], S = ci.pos.shape[1];
    TC_CHECK_ARG(S >= 1 && S <= 32 && T <= INT_MAX, kOp, "combine_into.pos",
                 "[T, S] with 1..32 slots per token and T < 2^31", ci.pos.describe());
    if (ci.weights) check_tensor(*ci.weights, kOp, "combine_into.weights", {DType::kF32}, Shape{T, S}, on);
    check_tensor(ci.row_token, kOp, "combine_into.row_token", {DType::kI32}, Shape{M}, on);
    check_tensor(ci.out, kOp, "combine_into.out", {a.out.dtype}, Shape{T, N}, on);
    TC_CHECK_ARG(a.combine == 1 && !a.w_up, kOp, "combine_into", "a plain projection without combine",
                 a.w_up ? std::string("a gated pair") : fmt::format("combine {}", a.combine));
  }
  if (backend == DeviceType::kCUDA) {
    const int dev = a.a.device.index;
    auto same = [&](const TensorView& t, const std::string& arg) {
      TC_CHECK_ARG(t.device.index == dev, kOp, arg, fmt::format("a tensor on cuda:{} (where a is)", dev),
                   t.describe());
    };
    same(a.out, "out");
    if (a.w.stacked) same(*a.w.stacked, "w");
    for (size_t e = 0; e < a.w.per_expert.size(); ++e) same(a.w.per_expert[e], fmt::format("w[{}]", e));
    if (a.w_up && a.w_up->stacked) same(*a.w_up->stacked, "w_up");
    if (a.w_up)
      for (size_t e = 0; e < a.w_up->per_expert.size(); ++e) same(a.w_up->per_expert[e], fmt::format("w_up[{}]", e));
    if (a.a_index) same(*a.a_index, "a_index");
    if (a.tile_expert) same(*a.tile_expert, "tile_expert");
    if (a.num_tiles) same(*a.num_tiles, "num_tiles");
    if (a.row_scale) same(*a.row_scale, "row_scale");
    if (a.row_token) same(*a.row_token, "row_token");
    if (a.tile_fill) same(*a.tile_fill, "tile_fill");
    if (a.combine_into) {
      same(a.combine_into->pos, "combine_into.pos");
      if (a.combine_into->weights) same(*a.combine_into->weights, "combine_into.weights");
      same(a.combine_into->row_token, "combine_into.row_token");
      same(a.combine_into->out, "combine_into.out");
    }
  }
}

jit::KernelSpec moe_grouped_gemm_kernel_spec(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  const bool dual = a.w_up.has_value(), vec = vector_ok(a);
  const int table = launch_table(a, c);
  const WeightLayout layout = a.w.layout;
  const std::string cfg = fmt::format("{}->{} {} {}{}{}{}{}", dtype_name(a.a.dtype), dtype_name(a.out.dtype), c.str(),
                                      weight_layout_name(layout), dual ? " silu*up" : "", vec ? "" : " scalar-loads",
                                      table ? fmt::format(" ptr-table{}", table) : "",
                                      global_weight_maps(a, c) ? " global-maps" : "");
  const std::string in = dtype_kernel_type(a.a.dtype), out = dtype_kernel_type(a.out.dtype);
  const std::string lay = layout == WeightLayout::kNK ? "0" : "1", gated = dual ? "true" : "false";
  if (c.gemv == 1 && c.bulk == 1)
    return {"moe/grouped_gemv_bulk.cuh", "tc::moe::grouped_gemv_bulk_kernel",
            {in, out, a.combine > 1 ? "1" : "0", std::to_string(table)},
            cfg + (a.combine > 1 ? fmt::format(" combine{}", a.combine) : std::string()), true};
  if (c.gemv == 1 && a.combine > 1)
    return {"moe/grouped_gemv.cuh", "tc::moe::grouped_gemv_combine_kernel",
            {in, out, std::to_string(c.block_n), std::to_string(table)}, cfg + fmt::format(" combine{}", a.combine),
            true};
  if (c.gemv == 1)
    return {"moe/grouped_gemv.cuh", "tc::moe::grouped_gemv_kernel",
            {in, out, std::to_string(c.block_m), std::to_string(c.block_n), gated, std::to_string(table)}, cfg, true};
  if (c.sm90 == 2 && (c.stagger > 0 || c.lean_a == 1 || c.lean_desc == 1 || c.fill_stores == 1)) {
    // The stagger and lean template arguments; trailing ones at the kernel
    // template's defaults (0, false) are dropped, so those forms keep the
    // names (and cache entries) they had before these keys existed.
    MoeGroupedGemmConfig plain = c;
    plain.stagger = plain.lean_a = plain.lean_desc = plain.fill_stores = 0;
    jit::KernelSpec k = moe_grouped_gemm_kernel_spec(a, plain);
    std::vector<std::string> extra{std::to_string(c.stagger), c.lean_a == 1 ? "true" : "false",
                                   c.lean_desc == 1 ? "true" : "false", c.fill_stores == 1 ? "true" : "false"};
    while (extra.back() == "false") extra.pop_back();
    k.template_args.insert(k.template_args.end(), extra.begin(), extra.end());
    k.config = cfg;
    return k;
  }
  if (c.sm90)
    return {c.sm90 == 2 ? "moe/grouped_gemm_sm90_ws.cuh" : "moe/grouped_gemm_sm90.cuh",
            c.sm90 == 2 ? "tc::moe::grouped_gemm_sm90_ws_kernel" : "tc::moe::grouped_gemm_sm90_kernel",
            c.sm90 == 2 ? std::vector<std::string>{in, out, std::to_string(c.block_m), std::to_string(c.block_n),
                                                   std::to_string(c.stages), lay, gated, std::to_string(table),
                                                   c.tma ? "true" : "false", c.tma == 2 ? "true" : "false",
                                                   c.tma_store == 1 ? "true" : "false", std::to_string(c.cluster)}
                        : std::vector<std::string>{in, out, std::to_string(c.block_m), std::to_string(c.block_n),
                                                   std::to_string(c.stages), lay, gated, std::to_string(table)},
            cfg,
            true};
  return {"moe/grouped_gemm.cuh",
          c.k_splits > 1 ? "tc::moe::grouped_gemm_split_kernel" : "tc::moe::grouped_gemm_kernel",
          {in, out, std::to_string(c.block_m), std::to_string(c.block_n), std::to_string(c.warps_m),
           std::to_string(c.warps_n), std::to_string(c.stages), lay, gated, vec ? "true" : "false",
           std::to_string(table)},
          cfg,
          true};
}

jit::KernelSpec moe_grouped_gemm_split_reduce_spec(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  const bool dual = a.w_up.has_value();
  return {"moe/grouped_gemm.cuh",
          "tc::moe::grouped_gemm_split_reduce_kernel",
          {dtype_kernel_type(a.out.dtype), std::to_string(c.block_m), dual ? "true" : "false",
           vector_ok(a) ? "true" : "false"},
          fmt::format("split-k reduce bm={}{}", c.block_m, dual ? " silu*up" : ""),
          true};
}

std::vector<jit::KernelSpec> moe_grouped_gemm_kernel_specs(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  std::vector<jit::KernelSpec> specs;
  if (global_weight_maps(a, c)) specs.push_back(tma_maps_kernel_spec());
  specs.push_back(moe_grouped_gemm_kernel_spec(a, c));
  if (c.k_splits > 1) specs.push_back(moe_grouped_gemm_split_reduce_spec(a, c));
  return specs;
}

// The split-K reduce: sums the slices of every valid row in order, then the
// GEMM's epilogue; one thread per output pair.
void launch_split_reduce(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c, const tc::moe::GroupedGemmParams& p,
                         CUstream stream, const jit::CompileOptions& compile) {
  const bool dual = a.w_up.has_value(), vec = vector_ok(a);
  static jit::OpKernelCache kernels;
  const uint64_t code = uint64_t(a.out.dtype) | uint64_t(c.block_m) << 4 | uint64_t(dual) << 12 | uint64_t(vec) << 13;
  const jit::Launchable& k =
      kernels.get(code, compile, a.a.device.index, [&] { return moe_grouped_gemm_split_reduce_spec(a, c); });
  const int64_t pairs = int64_t(p.M) * ((p.N + 1) / 2);
  tc::moe::GroupedGemmParams q = p;
  jit::launch(k, unsigned((pairs + 255) / 256), 1, 256, 0, stream, &q);
}

// The fused combine's parameters (GroupedGemmParams::comb_sync): its
// counters are a launch's zeroed block of launch_counters, one per row block
// plus two, so a row block holds enough row tiles for the block to fit.
void set_fused_combine(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c, tc::moe::GroupedGemmParams& p,
                       CUstream stream) {
  const auto& ci = *a.combine_into;
  const std::string why = moe_grouped_gemm_combine_blocker(a, c, ci.pos.shape[1]);
  TC_CHECK_ARG(why.empty(), kOp, "combine_into",
               "a launch that can fuse the combine (the warp-specialised kernel with A, weights and stores by TMA, "
               "the dynamic tile scheduler, one CTA per tile, a plain projection, 1..32 slots per token)", why);
  const int64_t row_tiles = (layout_rows(a) + c.block_m - 1) / c.block_m;
  const int64_t most = 2 * int64_t(CounterPairSlots::kMaxBlockPairs) - 2;
  const int64_t group = (row_tiles + most - 1) / most, blocks = (row_tiles + group - 1) / group;
  p.comb_sync = launch_counters(a.a.device.index, stream, kOp, unsigned((blocks + 2 + 1) / 2));
  p.comb_pos = ci.pos.ptr<int>();
  p.comb_weights = ci.weights ? ci.weights->ptr<float>() : nullptr;
  p.comb_row_token = ci.row_token.ptr<int>();
  p.comb_out = ci.out.data;
  p.comb_tokens = int(ci.pos.shape[0]);
  p.comb_k = int(ci.pos.shape[1]);
  p.comb_group = int(group);
}

// One tensor map over `experts` matrices at `base`, `expert_bytes` apart:
// dims (K, N, E) for layout NK with [block_n n][64 k] boxes, (N, K, E) for
// layout KN with [64 k][64 n] boxes.
void encode_weight_map(tc::moe::TmaDesc& d, const void* base, DType dtype, WeightLayout layout, int64_t N, int64_t K,
                       int64_t experts, int64_t expert_bytes, int block_n) {
  const bool nk = layout == WeightLayout::kNK;
  encode_tma_map(d, base, dtype, {nk ? K : N, nk ? N : K, experts}, {(nk ? K : N) * 2, expert_bytes},
                 {kBK, nk ? block_n : kBK});
}

// Fills the TMA launch parameter (maps for the gate and, when gated, the up
// weights; with tma = 2 also A, [a_rows, K] in [block_m][64] boxes) and hands
// it to `launch`. More experts by pointer than the parameters hold
// (global_weight_maps): the weight maps go to global memory, written on
// `stream` just before.
template <typename Launch>
void launch_tma(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c, const tc::moe::GroupedGemmParams& p,
                int table, CUstream stream, const jit::CompileOptions& compile, const Launch& launch) {
  const int64_t N = a.out.shape[1], K = a.a.shape[1], matrix_bytes = N * K * 2;
  const ExpertWeights* w[2] = {&a.w, a.w_up ? &*a.w_up : nullptr};
  auto fill_common = [&](auto& L) {
    std::memset(&L, 0, sizeof(L));
    L.p = p;
    const int64_t a_rows = a.a.shape[0];
    if (c.tma == 2) encode_tma_map(L.a_map, a.a.data, a.a.dtype, {K, a_rows, 1}, {K * 2, a_rows * K * 2}, {kBK, c.block_m});
    if (c.tma_store == 1) {  // [M][N] output in boxes of 64 rows x 128 bytes (GroupedGemmSm90Ws::store_tile_tma)
      const int64_t M = a.out.shape[0], row_bytes = N * dtype_size(a.out.dtype);
      encode_tma_map(L.c_map, a.out.data, a.out.dtype, {N, M, 1}, {row_bytes, M * row_bytes},
                     {int(128 / dtype_size(a.out.dtype)), 64});
    }
  };
  if (global_weight_maps(a, c)) {
    tc::moe::GroupedGemmTmaGlobalLaunch L;
    fill_common(L);
    tc::moe::TmaDesc tmpl[2] = {};
    std::vector<const void*> ptrs[2];
    const int mats = w[1] ? 2 : 1;
    for (int m = 0; m < mats; ++m) {
      encode_weight_map(tmpl[m], w[m]->per_expert[0].data, a.a.dtype, a.w.layout, N, K, 1, matrix_bytes, c.block_n);
      ptrs[m] = bases(*w[m]);
    }
    const DeviceWeightMaps maps = device_weight_maps(tmpl, ptrs, mats, a.a.device.index, stream, compile, kOp);
    L.maps[0] = maps.maps[0], L.maps[1] = maps.maps[1];
    launch(&L);  // under maps.hold
    return;
  }
  auto fill = [&](auto& L) {
    fill_common(L);
    for (int m = 0; m < 2 && w[m]; ++m) {
      if (w[m]->stacked)
        encode_weight_map(L.map[m][0], w[m]->stacked->data, a.a.dtype, a.w.layout, N, K, w[m]->num_experts(),
                          w[m]->expert_stride() * 2, c.block_n);
      else
        for (size_t e = 0; e < w[m]->per_expert.size(); ++e)
          encode_weight_map(L.map[m][e], w[m]->per_expert[e].data, a.a.dtype, a.w.layout, N, K, 1, matrix_bytes,
                            c.block_n);
    }
    launch(&L);
  };
  switch (table) {
    case 0: {
      tc::moe::GroupedGemmTmaLaunch<1> L;
      return fill(L);
    }
    case 8: {
      tc::moe::GroupedGemmTmaLaunch<8> L;
      return fill(L);
    }
    case 16: {
      static thread_local tc::moe::GroupedGemmTmaLaunch<16> L;  // 4 KB and up: off the stack
      return fill(L);
    }
    case 32: {
      static thread_local tc::moe::GroupedGemmTmaLaunch<32> L;
      return fill(L);
    }
    default: {
      static thread_local tc::moe::GroupedGemmTmaLaunch<kSmallTable> L;
      return fill(L);
    }
  }
}

void moe_grouped_gemm(const MoeGroupedGemmArgs& a, CUstream stream, const MoeGroupedGemmOptions& o) {
  validate_moe_grouped_gemm(a, DeviceType::kCUDA);
  const int64_t M = layout_rows(a), N = a.out.shape[1], K = a.a.shape[1];
  if (M == 0) return;
  const DeviceCall call(a.a.device, stream, kOp);
  const rt::DeviceInfo dev = rt::device_info(a.a.device.index);  // one lookup (a copy under a lock) per call
  const MoeGroupedGemmConfig c = moe_grouped_gemm_config(a, o.config, dev.cc_major, dev.sm_count);
  const bool dual = a.w_up.has_value(), vec = vector_ok(a);
  const int table = launch_table(a, c);
  const uint64_t code = uint64_t(c.block_m) | uint64_t(c.block_n) << 8 | uint64_t(c.stages) << 17 |
                        uint64_t(c.warps_m) << 21 | uint64_t(c.warps_n) << 26 | uint64_t(a.a.dtype) << 31 |
                        uint64_t(a.out.dtype) << 35 | uint64_t(a.w.layout) << 39 | uint64_t(dual) << 40 |
                        uint64_t(vec) << 41 | uint64_t(table) << 42 | uint64_t(c.sm90) << 53 |
                        uint64_t(std::max(c.tma, 0)) << 55 | uint64_t(c.k_splits > 1) << 57 |
                        uint64_t(c.gemv == 1) << 58 | uint64_t(c.tma_store == 1) << 59 | uint64_t(a.combine > 1) << 60 |
                        uint64_t(c.cluster == 2) << 61 | uint64_t(c.gemv == 1 && c.bulk == 1) << 62 |
                        uint64_t(c.carveout == 1) << 63;
  const BulkPlan bulk = c.gemv == 1 && c.bulk == 1 ? bulk_plan(a, c.bulk_cols) : BulkPlan{};
  // (A bulk kernel's ring depends on the shape: its limit is raised once to the most any takes.)
  // (The decode combine kernel's preload: its first item's weights, within
  // a limit set once for every launch of it on sm_90.)
  const bool combine_kernel = c.gemv == 1 && c.bulk != 1 && a.combine > 1 && dev.cc_major == 9;
  const int64_t preload = c.preload == 1 ? a.combine * int64_t(c.block_n) * K * 2 : 0;
  const int smem = bulk.fits ? int(bulk.smem()) : preload ? int(preload) : smem_bytes(c, dual);
  const int smem_limit = bulk.fits         ? int(kBulkSmemBytes)
                         : combine_kernel ? int(moe_grouped_gemm_max_preload_bytes)
                                          : smem;
  // (the code's 64 bits are taken: one cache per stagger 0..3, lean_a, lean_desc and fill_stores)
  static jit::OpKernelCache kernels[32];
  const jit::Launchable& k =
      kernels[(c.stagger & 3) | (c.lean_a == 1 ? 4 : 0) | (c.lean_desc == 1 ? 8 : 0) | (c.fill_stores == 1 ? 16 : 0)]
          .get(
              code, o.compile, a.a.device.index, [&] { return moe_grouped_gemm_kernel_spec(a, c); },
              [smem_limit, carveout = c.carveout == 1](const jit::Launchable& l) {
                TC_DRV(cuFuncSetAttribute, l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_limit);
                if (carveout)
                  TC_DRV(cuFuncSetAttribute, l.fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                         int(CU_SHAREDMEM_CARVEOUT_MAX_SHARED));
              });

  tc::moe::GroupedGemmParams p{};
  p.a = a.a.data;
  p.a_index = a.a_index ? a.a_index->ptr<int>() : nullptr;
  p.tile_expert = a.tile_expert ? a.tile_expert->ptr<int>() : nullptr;
  p.num_tiles = a.num_tiles ? a.num_tiles->ptr<int>() : nullptr;
  p.num_experts = int(a.w.num_experts());
  p.row_scale = a.row_scale ? a.row_scale->ptr<float>() : nullptr;
  p.row_token = a.row_token ? a.row_token->ptr<int>() : nullptr;
  p.c = a.out.data;
  p.lda = K;
  p.ldb = a.w.layout == WeightLayout::kNK ? K : N;
  p.ldc = N;
  p.M = int(M), p.N = int(N), p.K = int(K), p.a_rows = int(a.a.shape[0]);
  p.group_m = c.group_m;
  p.group_align = c.group_align;
  p.a_repeat = int(a.a_repeat), p.combine = int(a.combine);
  p.tile_fill = a.tile_fill && c.half_skip != 0 ? a.tile_fill->ptr<int>() : nullptr;
  p.store_fill = c.fill_stores == 1 ? a.tile_fill->ptr<int>() : nullptr;
  p.multicast = c.multicast;
  if (a.schedule_settled && c.gemv == 1 && a.combine > 1) {
    // Settled: the slots before the grid wait (-1), and with prefetch=1 the
    // first weights into L2. The CTAs resident at once (2 per SM) prefetch
    // at most half the L2 in all: more evicted itself before use
    // (DeepSeek-V3 T = 1, H200: 264 CTAs x 512 KB into 60 MB took down +
    // combine to 81-84 us; within half the L2, 73 us; with no prefetch but
    // the slots read early, 69 us, hence not the default).
    const int64_t items = a.out.shape[0] * ((N + c.block_n - 1) / c.block_n);
    const int64_t resident = std::max<int64_t>(1, std::min<int64_t>(items, 2 * int64_t(dev.sm_count)));
    const int64_t bytes = std::min<int64_t>(int64_t(dev.l2_bytes) / 2 / resident / a.combine / 16 * 16, INT_MAX);
    p.prefetch = c.prefetch == 1 && bytes > 0 ? int(bytes) : -1;
    p.preload = int(preload);
  }
  if (a.combine_into) set_fused_combine(a, c, p, stream);
  unsigned grid_x = unsigned((M + c.block_m - 1) / c.block_m), grid_y = unsigned((N + c.block_n - 1) / c.block_n);
  TC_CHECK_ARG(c.group_m > 0 || c.sm90 == 2 || grid_y <= 65535, kOp, "out", "N / block_n <= 65535",
               a.out.describe());
  TC_CHECK_ARG(uint64_t(grid_x) * grid_y <= uint64_t(INT_MAX), kOp, "out", "fewer than 2^31 output tiles",
               a.out.describe());
  p.tiles_total = int64_t(grid_x) * grid_y;
  unsigned threads = unsigned(32 * c.warps_m * c.warps_n);
  const bool per_row = c.gemv == 1 && (a.combine > 1 || c.block_m == 1);
  TC_CHECK_ARG(!per_row || a.out.shape[0] * N <= int64_t(INT_MAX), kOp, "out",
               "fewer than 2^31 elements for the decode kernels (gemv=1) on a per-row schedule", a.out.describe());
  if (bulk.fits) {
    // One CTA per SM (each holds a ring), an even range of the flat columns each.
    const int64_t pieces = (a.out.shape[0] * N + bulk.cols - 1) / bulk.cols;
    grid_x = unsigned(std::clamp<int64_t>(pieces, 1, std::max(dev.sm_count, 1)));
    grid_y = 1;
    threads = kBulkThreads;
    p.bulk_stages = bulk.stages, p.bulk_cols = bulk.cols, p.bulk_abufs = bulk.abufs;
  } else if (per_row) {
    // Per-row schedules: the kernel splits the flat columns (rows x N) into
    // one even range per CTA. One CTA per item (output row or row tile x
    // block_n columns), or, with balance and more items than fit the GPU at
    // once, one per resident CTA. (Within one wave every CTA holds one item
    // already; H200, Qwen3-30B T = 1 gate/up, 384 items: the resident CTAs
    // over the same columns took 22 us against 17.)
    const int64_t rows = a.combine > 1 ? a.out.shape[0] : std::min<int64_t>(M, live_tiles_bound(a, c) / grid_y);
    const int64_t items = rows * grid_y;
    const int64_t resident = int64_t(jit::max_active_blocks(k, threads, 0)) * std::max(dev.sm_count, 1);
    const int64_t half_items = (rows * N + c.block_n / 2 - 1) / (c.block_n / 2);  // items of half the width
    grid_x = unsigned(c.balance == 2 ? std::clamp<int64_t>(half_items, 1, resident)
                      : c.balance == 1 && items > resident ? resident
                                                           : items);
    grid_y = 1;
  } else if (c.gemv == 1) {
    // One CTA per item (row tile x block_n columns) that can hold rows; the
    // kernel loops when there are more.
    grid_x = unsigned(std::min<int64_t>(p.tiles_total, live_tiles_bound(a, c)));
    grid_y = 1;
  } else if (c.cluster == 2) {  // (only ever chosen for the warp-specialised kernel)
    // CTA pairs over tile pairs; persistent: as many pairs as fit at once
    // (a pair takes two SMs of one GPC), else one pair per tile pair.
    const int64_t pairs = (p.tiles_total + 1) / 2;
    const int64_t resident = jit::max_active_clusters(k, unsigned(32 * c.warps_m * c.warps_n), unsigned(smem), 2);
    grid_x = unsigned(2 * (c.persistent >= 1 ? std::min<int64_t>(pairs, resident) : pairs));
    grid_y = 1;
    if (c.persistent == 2) p.sched = launch_counter_pair(a.a.device.index, stream, kOp);
  } else if (c.sm90 == 2) {
    // 1-D walk over the tiles; persistent: one CTA per SM (the ring fills
    // the SM's shared memory) loops over them.
    grid_x = unsigned(c.persistent >= 1 ? std::min<int64_t>(p.tiles_total, std::max(dev.sm_count, 1)) : p.tiles_total);
    grid_y = 1;
    if (c.persistent == 2) p.sched = launch_counter_pair(a.a.device.index, stream, kOp);
  } else if (c.group_m > 0) {
    grid_x *= grid_y, grid_y = 1;
    // mma.sync: CTAs loop over the grouped order, whose tiles in use come
    // first; launch about as many as can be in use (decode: most of the
    // capacity's tiles are empty padding).
    if (c.sm90 == 0 && table <= 64) grid_x = unsigned(std::min<int64_t>(grid_x, live_tiles_bound(a, c)));
  }
  // Split K: slices of whole 64-wide steps; fp32 partials in stream-ordered
  // scratch (freed after the reduce, graph-capturable), one per slice and
  // matrix, summed by the reduce kernel in slice order.
  unsigned grid_z = 1;
  std::optional<rt::ScratchBuffer> partial;
  if (c.k_splits > 1) {
    const int64_t steps = (K + kBK - 1) / kBK, per = (steps + c.k_splits - 1) / c.k_splits;
    p.k_per_split = int(per * kBK);
    p.k_splits = int((steps + per - 1) / per);
    partial.emplace(size_t(p.k_splits) * (dual ? 2 : 1) * size_t(M) * size_t(N) * sizeof(float), stream);
    p.partial = reinterpret_cast<float*>(partial->get());
    grid_z = unsigned(p.k_splits);
  }
  auto launch_main = [&](void* L) {
    jit::launch(k, grid_x, grid_y, threads, unsigned(smem), stream, L, grid_z, unsigned(c.cluster));
    if (c.k_splits > 1) launch_split_reduce(a, c, p, stream, o.compile);
  };
  if (c.tma >= 1) {  // warp-specialised kernel: never split
    launch_tma(a, c, p, table, stream, o.compile, launch_main);
    return;
  }
  if (table == 0) {
    p.b[0] = a.w.stacked->data;
    p.b[1] = a.w_up ? a.w_up->stacked->data : nullptr;
    p.b_expert_stride = a.w.expert_stride();  // (w_up's is the same: checked)
    tc::moe::GroupedGemmLaunch<1> L{p, {}};
    launch_main(&L);
    return;
  }
  auto fill = [&](auto& L) {
    L.p = p;
    const auto w = bases(a.w);
    for (size_t e = 0; e < w.size(); ++e) L.table.ptr[0][e] = w[e];
    if (a.w_up) {
      const auto u = bases(*a.w_up);
      for (size_t e = 0; e < u.size(); ++e) L.table.ptr[1][e] = u[e];
    }
    launch_main(&L);
  };
  if (table == kSmallTable) {
    tc::moe::GroupedGemmLaunch<kSmallTable> L{};
    fill(L);
  } else {
    static thread_local tc::moe::GroupedGemmLaunch<kLargeTable> L;  // 8 KB: off the stack
    std::memset(&L, 0, sizeof(L));
    fill(L);
  }
}

void moe_grouped_gemm_cpu(const MoeGroupedGemmArgs& a) {
  validate_moe_grouped_gemm(a, DeviceType::kCPU);
  const int64_t M = layout_rows(a), N = a.out.shape[1], K = a.a.shape[1], S = a.combine;
  const auto w = bases(a.w);
  const auto u = a.w_up ? bases(*a.w_up) : std::vector<const void*>();
  reference::MoeGroupedGemmRef r{};
  const TensorView A = a.a;
  r.load_a = [A, K](int64_t src, float* row) { load_row_f32(A.data, A.dtype, size_t(src * K), K, row); };
  r.load_w = reference::weights_from_memory(w.data(), a.w_up ? u.data() : nullptr, a.a.dtype,
                                            a.w.layout == WeightLayout::kKN, N, K);
  r.gated = a.w_up.has_value();
  std::vector<int32_t> repeat_index;  // a_repeat as the gather it stands for
  if (!a.a_index && a.a_repeat > 1) {
    repeat_index.resize(size_t(M));
    for (int64_t row = 0; row < M; ++row) repeat_index[size_t(row)] = int32_t(row / a.a_repeat);
  }
  r.a_index = a.a_index ? a.a_index->ptr<int32_t>() : repeat_index.empty() ? nullptr : repeat_index.data();
  r.row_token = a.row_token ? a.row_token->ptr<int32_t>() : nullptr;
  r.tile_expert = a.tile_expert ? a.tile_expert->ptr<int32_t>() : nullptr;
  r.num_tiles = a.num_tiles ? a.num_tiles->ptr<int32_t>() : nullptr;
  r.row_scale = a.row_scale && S == 1 ? a.row_scale->ptr<float>() : nullptr;  // combine scales after rounding
  r.row_mask = nullptr;
  // combine: every layout row in fp32, rounded to the output type (as a
  // down projection would store it), then each output row's S rows times
  // their scales summed in order in fp32 (fma) and rounded once; rows
  // without an expert add nothing.
  std::vector<float> rows(S > 1 ? size_t(M * N) : 0, 0.f);
  r.out = S > 1 ? rows.data() : a.out.data, r.out_dtype = S > 1 ? DType::kF32 : a.out.dtype;
  r.M = M, r.N = N, r.K = K, r.E = a.w.num_experts(), r.a_rows = a.a.shape[0];
  r.block_m = a.tile_expert ? block_m_of(a) : std::max<int64_t>(M, 1);
  reference::moe_grouped_gemm(r);
  // The fused layer's combine, one output row at a time (reference::
  // fused_moe_combine_row: fma in slot order, rounded to the output type).
  std::vector<const float*> slot(static_cast<size_t>(S));
  std::vector<float> scale(static_cast<size_t>(S)), out_row(static_cast<size_t>(N));
  for (float& v : rows) v = reference::round_to(v, a.out.dtype);
  for (int64_t t = 0; S > 1 && t < M / S; ++t) {
    for (int64_t j = 0; j < S; ++j) {
      const int64_t row = t * S + j;
      slot[size_t(j)] = reference::grouped_gemm_row_expert(r, row) < 0 ? nullptr : rows.data() + row * N;
      scale[size_t(j)] = a.row_scale ? a.row_scale->ptr<float>()[row] : 1.f;
    }
    reference::fused_moe_combine_row(slot.data(), scale.data(), S, N, a.out.dtype, out_row.data());
    for (int64_t n = 0; n < N; ++n) {
      const size_t i = size_t(t * N + n);
      switch (a.out.dtype) {  // values already rounded: the casts are exact
        case DType::kBF16: static_cast<uint16_t*>(a.out.data)[i] = conv::f32_to_bf16(out_row[size_t(n)]); break;
        case DType::kF16: static_cast<uint16_t*>(a.out.data)[i] = conv::f32_to_f16(out_row[size_t(n)]); break;
        default: static_cast<float*>(a.out.data)[i] = out_row[size_t(n)]; break;
      }
    }
  }
  if (a.combine_into) {  // the fused combine: moe_reduce_fused over the rows just written
    MoeReduceFusedArgs rf;
    rf.x = a.out;
    rf.token_topk_to_pos = a.combine_into->pos;
    rf.topk_weights = a.combine_into->weights;
    rf.out = a.combine_into->out;
    moe_reduce_fused_cpu(rf);
  }
}

}  // namespace tilecraft::ops
