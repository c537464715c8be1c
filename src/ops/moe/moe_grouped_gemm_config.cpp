// The grouped GEMM's config: its keys, the tile height heuristic and the
// choice of kernel and tiles for a call (moe_grouped_gemm_config), each
// default with the measurements that chose it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

#include "moe/grouped_gemm_params.cuh"
#include "moe/tile_order.cuh"
#include "ops/check.h"
#include "ops/moe/moe_grouped_gemm_common.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
using namespace grouped_gemm;

std::string MoeGroupedGemmConfig::str() const {
  // group_m is a launch parameter, not shown; persistent (also one) is, as it
  // changes how the warp-specialised kernel runs.
  if (gemv == 1 && bulk == 1)
    return fmt::format("gemv-bulk bm={} one CTA per SM, shared-memory ring{}", block_m,
                       bulk_cols > 0 ? fmt::format(", {} columns per piece", bulk_cols) : "");
  if (gemv == 1) return fmt::format("gemv bm={} cols={} rows/pass<=4", block_m, block_n);
  if (sm90 == 1) return fmt::format("wgmma bm={} bn={} bk={} stages={} warpgroups=2", block_m, block_n, kBK, stages);
  if (sm90 == 2)
    return fmt::format("wgmma-ws bm={} bn={} bk={} stages={} warpgroups=1+2{}{}{}{}{}{}{}{}", block_m, block_n, kBK,
                       stages,
                       tma == 2   ? " tma-a+weights"
                       : tma == 1 ? " tma-weights"
                                  : "",
                       tma_store == 1 ? " tma-store" : "",
                       persistent == 2   ? " persistent-dynamic"
                       : persistent == 1 ? " persistent"
                                         : "",
                       cluster == 2 ? (multicast == 1 ? " cta-pairs-multicast" : " cta-pairs") : "",
                       stagger > 0 ? fmt::format(" stagger={}", stagger) : "", lean_a == 1 ? " lean-a" : "",
                       lean_desc == 1 ? " lean-desc" : "", fill_stores == 1 ? " fill-stores" : "");
  return fmt::format("mma bm={} bn={} bk={} stages={} warps={}x{}{}", block_m, block_n, kBK, stages, warps_m, warps_n,
                     k_splits > 1 ? fmt::format(" split-k={}", k_splits) : "");
}

namespace {
// Every config key with its field: one table for setting, listing and
// naming the overrides of a config.
struct ConfigKey {
  const char* name;
  int MoeGroupedGemmConfig::*field;
};
using C = MoeGroupedGemmConfig;
constexpr ConfigKey kConfigKeys[] = {
    {"block_m", &C::block_m},
    {"block_n", &C::block_n},
    {"stages", &C::stages},
    {"warps_m", &C::warps_m},
    {"warps_n", &C::warps_n},
    {"sm90", &C::sm90},
    {"tma", &C::tma},
    {"persistent", &C::persistent},
    {"k_splits", &C::k_splits},
    {"group_m", &C::group_m},
    {"gemv", &C::gemv},
    {"tma_store", &C::tma_store},
    {"half_skip", &C::half_skip},
    {"prefetch", &C::prefetch},
    {"preload", &C::preload},
    {"carveout", &C::carveout},
    {"balance", &C::balance},
    {"bulk", &C::bulk},
    {"bulk_cols", &C::bulk_cols},
    {"cluster", &C::cluster},
    {"multicast", &C::multicast},
    {"stagger", &C::stagger},
    {"lean_a", &C::lean_a},
    {"lean_desc", &C::lean_desc},
    {"fill_stores", &C::fill_stores},
    {"group_align", &C::group_align},
};
}  // namespace

const char* moe_grouped_gemm_config_keys() {
  static const std::string keys = [] {
    std::string s;
    for (const ConfigKey& k : kConfigKeys) s += (s.empty() ? "" : ", ") + std::string(k.name);
    return s;
  }();
  return keys.c_str();
}

bool is_moe_grouped_gemm_config_key(const std::string& key) {
  return std::any_of(std::begin(kConfigKeys), std::end(kConfigKeys), [&](const ConfigKey& k) { return key == k.name; });
}

void set_config_key(MoeGroupedGemmConfig& c, const std::string& key, int value, const char* op, const char* arg) {
  for (const ConfigKey& k : kConfigKeys)
    if (key == k.name) {
      c.*(k.field) = value;
      return;
    }
  throw_arg_error(ErrorKind::kInvalidArgument, op, arg, std::string("keys ") + moe_grouped_gemm_config_keys(),
                  "'" + key + "'");
}

std::string moe_grouped_gemm_overrides(const MoeGroupedGemmConfig& c, const std::string& prefix) {
  const MoeGroupedGemmConfig defaults;
  std::string s;
  for (const ConfigKey& k : kConfigKeys)
    if (c.*(k.field) != defaults.*(k.field))
      s += fmt::format("{}{}{}={}", s.empty() ? "" : ", ", prefix, k.name, c.*(k.field));
  return s;
}

int moe_grouped_gemm_block_m(double rows_per_expert, bool wgmma) {
  // Each expert's rows are padded to the tile height, and an expert whose
  // rows spill into a second tile reads its weights twice: decode-sized
  // groups take 16 or 32 rows. From 64 rows per expert up, 128-row wgmma
  // tiles win on the H200 even half empty: 64-row wgmma tiles halve the
  // weight reuse per tile and measured slower (DeepSeek-V3 T=4096 gate/up
  // 11.6 ms against 8.4 ms; docs/perf/fused_moe.md).
  // With the warp-specialised kernel at hand, 64-row tiles from 9 rows per
  // expert up: although mostly padding, they stream the weights by TMA
  // faster than the mma.sync kernel's 32- and 64-row tiles. H200, session
  // 15, whole layers: Mixtral T=256 (64 rows per expert) 1419 -> 851 us,
  // Qwen3-30B T=512 (32) 431 -> 349 us, DeepSeek-V3 T=512 (16) 5.70 -> 5.41
  // ms, Qwen3-30B T=256 (16) 356 -> 341 us; at 8 rows and fewer it tied or
  // lost (DeepSeek-V3 T=256 5.30 both, T=64 4.65 -> 4.68 ms).
  // Above 8 rows the wgmma tile is 64 rows only while an expert's rows
  // rarely spill past 64 (mean + 2 standard deviations of a uniform
  // routing's count, ~sqrt(mean)): an expert that spills takes a second
  // 64-row tile that re-reads its weights, and at a mean of 64 rows half the
  // experts do. H200, session 41, kernel_only with 128-row tiles over 64-row
  // (one process each): at 64 rows per expert Mixtral 0.845x, Qwen3-30B
  // 0.912x, Qwen3-235B 0.871x, DeepSeek-V3 0.805x; at 48 rows Mixtral 1.013x,
  // Qwen3-30B 1.042x, DeepSeek-V3 0.998x; at 32 Mixtral 1.027x.
  if (rows_per_expert <= 8) return 16;
  if (wgmma) return rows_per_expert + 2.0 * std::sqrt(rows_per_expert) <= 64.0 ? 64 : 128;
  if (rows_per_expert <= 24) return 32;
  if (rows_per_expert <= 64) return 64;
  return 128;
}

std::string moe_grouped_gemm_combine_blocker(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c,
                                             int64_t slots) {
  if (c.sm90 != 2 || c.tma != 2 || c.tma_store != 1 || c.gemv == 1)
    return fmt::format("{} (not the warp-specialised kernel with A, weights and stores by TMA)", c.str());
  if (c.cluster == 2) return "cluster=2 (one CTA per tile only)";
  // A combine warp waits for row tiles; its CTA cannot leave until they are
  // stored. With the static walk (persistent 0 or 1) a tile may belong to a
  // CTA not yet resident (persistent=0 past one wave; persistent=1 when
  // other work holds SMs), which waits for the SM that waiting CTA holds: a
  // deadlock. The dynamic scheduler hands tiles only to running CTAs.
  if (c.persistent != 2)
    return fmt::format("persistent={} (the dynamic tile scheduler, persistent=2, only: with a static walk a "
                       "waiting combine warp can hold the SM its tile's CTA needs)",
                       c.persistent);
  if (a.w_up || a.combine != 1) return "a gated projection or a decode combine";
  if (!a.tile_expert) return "no tile schedule";
  if (a.out.dtype == DType::kF32 || a.out.shape[1] % 8) return fmt::format("out {}", a.out.describe());
  if (slots < 1 || slots > 32) return fmt::format("{} slots per token (at most 32)", slots);
  return "";
}

namespace {

// Split K when the launch has fewer live tiles than SMs and long K: decode
// of a few small experts (Qwen3-30B T=1 gate/up: 96 tiles of 32 k-steps on
// 132 SMs, 38.9 -> 31.0 us with 2 slices, 33.3 with 3; H200,
// docs/perf/fused_moe.md). 128 tiles of 12 k-steps (its down GEMM) got
// slower (15.2 -> 25.1 us): the reduce launch outweighs the gain, hence the
// floor of 16 k-steps per slice. Live tiles are bounded by rows_used (the
// layer's T * top_k); without it every tile of M counts.
int auto_k_splits(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c, int sm_count) {
  if (sm_count <= 0) return 1;
  const int64_t tiles = live_tiles_bound(a, c);
  const int64_t steps = (a.a.shape[1] + kBK - 1) / kBK;
  if (tiles > sm_count || steps < 32) return 1;
  return int(std::clamp<int64_t>(std::min(2 * sm_count / tiles, steps / 16), 1, 4));
}

// Overrides that only the MMA kernels take: with any of them the choice is
// theirs, and gemv=1 next to one is an error. block_n also leaves the choice
// to the MMA kernels, but with gemv=1 it sets the decode kernel's columns
// per item.
bool mma_overrides(const MoeGroupedGemmConfig& o) {
  return o.sm90 >= 1 || o.tma >= 1 || o.persistent >= 1 || o.k_splits > 1 || o.stages || o.warps_m || o.warps_n ||
         o.tma_store >= 1 || o.cluster == 2 || o.multicast == 1;
}

// CTA pairs (cluster=2) by default: the gated projection on 128-row
// warp-specialised tiles with TMA weights, for 256 experts or more that
// average about one tile each (0.75..1.25 x 128 rows), so about half of them
// spill into a second, mostly empty tile; with half_skip on as well. H200,
// session 16, same runs (gate/up kernel, us): DeepSeek-V3 T=4096 (1.0 tile
// per expert) 4776-4779 against 5182-5201 (layer 7314-7331 against
// 7780-7784); Kimi-K2 T=6144 (384 experts, 1.0) 7261-7341 against 8002-8031.
// Pairs lost everywhere else measured: Mixtral T=512 (8 experts, 1.0 tile)
// 718-719 against 669; Kimi-K2 T=4096 (0.67 tiles) 6033-6043 against
// 5929-5950; Qwen3-235B T=4096 (2.0) 1778-1790 against 1672; Qwen3-30B
// T=4096 (2.0) 513-515 against 440; race 2 (128) 1730 against 1445; Mixtral
// T=4096 (4.0) 3582-3591 against 2936-2979; down projections tie or lose.
// Nothing between 8 and 256 experts was measured. Why the pairs win is not
// measured either: the guess is that a pair keeps an expert's two tiles in
// lockstep, so its weights stream from DRAM once (session 11's ncu saw a
// quarter of DeepSeek-V3's read twice).
bool pairs_by_default(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c, bool dual) {
  const int64_t experts = a.w.num_experts(), tile_rows = int64_t(c.block_m) * experts;
  return dual && c.sm90 == 2 && c.tma >= 1 && c.block_m == 128 && experts >= 256 && 4 * a.rows_used >= 3 * tile_rows &&
         4 * a.rows_used <= 5 * tile_rows;
}

// The decode kernel: by default where the live rows average at most one per
// expert (the layer at T <= E / top_k tokens), so each tile holds a few real
// rows and one pass of up to 4 rows reads its weights once, and where each
// output column streams at least 4096 weight elements (K x matrices), which
// amortises a CTA's fixed cost (launch, row compaction, reductions, stores)
// over its item. Measured on the H200 (session 12, gemv against the MMA
// kernels, same run): gate/up of Qwen3-30B (K 2048 x 2) 19 against 27 us at
// T = 1, a tie at T = 16; of DeepSeek-V3 (7168 x 2) 120 against 127 us at
// T = 1, 1304 against 1395 at T = 16; their down projections (768 and
// 2048 x 1) lost: 16.0 against 14.0, 92 against 76, 70.3 against 69.5 and
// 725 against 695 us.
int resolve_gemv(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over, int block_m) {
  TC_CHECK_ARG(over.gemv >= -1 && over.gemv <= 1, kOp, "gemv", "0 (MMA kernels), 1 (decode kernel) or -1 (choose)",
               std::to_string(over.gemv));
  const bool gemv_ok =
      (block_m == 1 || block_m == 16 || block_m == 32) && a.w.layout == WeightLayout::kNK && vector_ok(a);
  const auto given = [&] {
    return fmt::format("block_m {}, {} weights, {} rows", block_m, weight_layout_name(a.w.layout),
                       vector_ok(a) ? "aligned" : "unaligned");
  };
  TC_CHECK_ARG(over.gemv < 1 || gemv_ok, kOp, "gemv",
               "the decode kernel only for per-row schedules or 16- or 32-row tiles, [N, K] weights and 16-byte "
               "aligned rows",
               given());
  // Only the decode kernel runs per-row schedules, a_repeat and combine.
  if (block_m == 1 || a.a_repeat > 1 || a.combine > 1) {
    TC_CHECK_ARG(gemv_ok && over.gemv != 0, kOp, "gemv",
                 "the decode kernel (gemv 1 or -1; [N, K] weights, 16-byte aligned rows, per-row or 16-/32-row "
                 "tiles) for a per-row schedule, a_repeat or combine",
                 fmt::format("gemv {}, {}", over.gemv, given()));
    return 1;
  }
  if (over.gemv >= 0) return over.gemv;
  const int64_t per_column = a.a.shape[1] * (a.w_up ? 2 : 1);
  return gemv_ok && !mma_overrides(over) && !over.block_n && a.rows_used > 0 && a.rows_used <= a.w.num_experts() &&
                 per_column >= 4096
             ? 1
             : 0;
}

// Per-SM imbalance of `items` equal items spread over `sms` SMs: the
// busiest SM's share over the mean (1 = even). The decode kernels stream
// weights, so an SM's time is its items' bytes.
double spread_waste(int64_t items, int sms) {
  return double((items + sms - 1) / sms) * sms / double(std::max<int64_t>(items, 1));
}

// The decode kernels' columns per item. GroupedGemv (8 warps x block_n / 8
// columns): 32 gated / 64 plain, or half that; GroupedGemvCombine: 16 or 8.
// Default: the widest for tile schedules (their live items are unknown
// here). Per-row schedules (every row live): gate/up takes the width whose
// items spread most evenly over the SMs, the wider on a tie (fewer CTAs,
// longer streams); the combine kernel takes 16 columns wherever its items
// still give every SM one, else 8. H200, session 14: Qwen3-30B T = 1
// gate/up: 192 wide items leave 60 of 132 SMs with twice the weights of the
// rest, 384 narrow ones (3 CTAs per SM) fit one even wave (18.6 against
// 19.3 us); DeepSeek-V3 T = 1: 512 or 1024 items, equally even, and the wide
// ones won (121 against 129 us). Session 15 (the combine kernel reading its
// slots before the grid wait, no L2 prefetch): DeepSeek-V3 T = 1 down +
// combine 64.3-64.8 us with 448 items of 16 against 68.2-68.7 with 896 of 8
// (although 896 spread more evenly); Qwen3-30B T = 1 (128 items of 16 on
// 132 SMs against 256 of 8): 13.2-13.7 against 13.6-13.7, a tie.
int gemv_block_n(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over, int block_m, int sm_count) {
  const bool dual = a.w_up.has_value();
  const std::vector<int> widths =
      a.combine > 1 ? std::vector<int>{16, 8} : std::vector<int>{dual ? 32 : 64, dual ? 16 : 32};
  if (over.block_n) {
    TC_CHECK_ARG(std::find(widths.begin(), widths.end(), over.block_n) != widths.end(), kOp, "block_n",
                 a.combine > 1 ? std::string("8 or 16 with combine")
                               : fmt::format("{} or {} with gemv=1 ({} projection)", widths[0], widths[1],
                                             dual ? "a gated" : "a plain"),
                 std::to_string(over.block_n));
    return over.block_n;
  }
  if (block_m != 1 || sm_count <= 0) return widths[0];
  const int64_t N = a.out.shape[1], rows = a.out.shape[0];  // output rows: items are rows x column blocks
  const auto items = [&](int bn) { return rows * ((N + bn - 1) / bn); };
  if (a.combine > 1) return items(widths[0]) >= sm_count ? widths[0] : widths[1];
  int best = widths[0];
  double best_waste = 1e30;
  for (int bn : widths) {
    const double w = spread_waste(items(bn), sm_count);
    if (w < best_waste * 0.99) best = bn, best_waste = w;
  }
  return best;
}

// The tile height: the schedule's (an override must agree), else the
// override, else the heuristic on M.
int resolve_block_m(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over) {
  const int64_t sched_bm = block_m_of(a);
  if (sched_bm && over.block_m)
    TC_CHECK_ARG(over.block_m == sched_bm, kOp, "block_m",
                 fmt::format("{} (the tile schedule's tile height)", sched_bm), std::to_string(over.block_m));
  return sched_bm ? int(sched_bm) : (over.block_m ? over.block_m : moe_grouped_gemm_block_m(double(layout_rows(a))));
}

}  // namespace

bool moe_grouped_gemm_uses_gemv(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over) {
  return resolve_gemv(a, over, resolve_block_m(a, over)) == 1;
}

namespace {
std::optional<rt::DeviceInfo> device_info_if_gpu(int device) {
  try {
    if (rt::driver_available()) return rt::device_info(device);
  } catch (const Error&) {
  }
  return std::nullopt;
}
}  // namespace

int sm_count_if_gpu(int device) {
  const auto info = device_info_if_gpu(device);
  return info ? info->sm_count : 0;
}

int cc_major_if_gpu(int device) {
  const auto info = device_info_if_gpu(device);
  return info ? info->cc_major : 0;
}

int listing_cc_major(int asked, int device) {
  if (asked > 0) return asked;
  const int gpu = cc_major_if_gpu(device);
  return gpu > 0 ? gpu : 9;
}

bool moe_grouped_gemm_wgmma_ok(const MoeGroupedGemmArgs& a, int cc_major) { return cc_major == 9 && vector_ok(a); }

namespace {

// Every key but group_align (resolved on top by moe_grouped_gemm_config).
MoeGroupedGemmConfig choose_config(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over, int cc_major,
                                   int sm_count) {
  const bool dual = a.w_up.has_value();
  const int64_t N = a.out.shape[1];
  MoeGroupedGemmConfig c;
  c.tma = 0, c.persistent = 0, c.k_splits = 1, c.tma_store = 0, c.preload = 0, c.carveout = 0;  // resolved below
  TC_CHECK_ARG(over.carveout >= -1 && over.carveout <= 1, kOp, "carveout",
               "0 (the driver's L1 / shared memory split), 1 (the most shared memory; decode kernels on sm_90) or -1 "
               "(choose)",
               std::to_string(over.carveout));
  c.block_m = resolve_block_m(a, over);
  // Groups of 8 row tiles: with ~130 resident CTAs, a wave covers ~8 row
  // blocks x ~16 column blocks, which fit L2 together for the layer's shapes.
  // Where the experts average at most half a tile of rows (most hold one
  // row tile), row tiles share no weights, and grouping them only spreads a
  // wave over 8 experts' matrices: there one row tile at a time (all its
  // column tiles in a row). H200, session 29 (experts scope, us):
  // DeepSeek-V3 T=512 (16 rows per expert, 64-row tiles) 5324-5325 against
  // 5395-5398, Kimi-K2 T=512 7928-7929 against 8039-8042, DeepSeek-V3 T=64
  // 4807-4810 against 4826-4828; where experts hold a tile or more it lost
  // or tied (Mixtral T=512, 128 rows per 128-row tile: 1157-1172 against
  // 1039-1042; DeepSeek-V3 T=4096 and Qwen3-30B T=4096 within 0.5%).
  const bool sparse_rows = a.rows_used > 0 && 2 * a.rows_used <= int64_t(c.block_m) * a.w.num_experts();
  // (The warp-specialised kernel's gated projection of many experts may
  // also choose 1: see there.)
  c.group_m = over.group_m >= 0 ? over.group_m : sparse_rows ? 1 : 8;
  TC_CHECK_ARG(c.group_m >= 0 && c.group_m <= 4096, kOp, "group_m", "0 (2-D grid) or 1..4096 row tiles per group",
               std::to_string(c.group_m));
  TC_CHECK_ARG(over.half_skip >= -1 && over.half_skip <= 1, kOp, "half_skip",
               "0 (every half computes), 1 (empty 64-row halves skip their MMAs) or -1 (choose)",
               std::to_string(over.half_skip));
  // Chosen on from 256 rows per expert: H200, session 15, same runs (layer
  // kernels, us): Qwen3-30B T=4096 (~256 rows per expert) gate/up 439 against
  // 451, down 219 against 223; DeepSeek-V3 T=4096 (~128) lost, gate/up 5341-5351
  // against 5259-5279 ms, down 2433-2438 against 2418-2419 (unexplained:
  // its kernels are L2-bound, where skipped MMAs should change nothing).
  c.half_skip = over.half_skip >= 0 ? over.half_skip : a.rows_used >= 256 * a.w.num_experts() ? 1 : 0;
  TC_CHECK_ARG(over.prefetch >= -1 && over.prefetch <= 1, kOp, "prefetch",
               "0 (no L2 prefetch), 1 (prefetch within half the L2) or -1 (choose)", std::to_string(over.prefetch));
  c.prefetch = over.prefetch == 1 ? 1 : 0;
  TC_CHECK_ARG(over.balance >= -1 && over.balance <= 2, kOp, "balance",
               "0 (one decode CTA per item), 1 (resident CTAs over even column ranges past one wave), 2 (always) or "
               "-1 (choose)",
               std::to_string(over.balance));
  c.balance = over.balance >= 0 ? over.balance : 1;
  TC_CHECK_ARG(over.cluster == -1 || over.cluster == 1 || over.cluster == 2, kOp, "cluster",
               "1 (one CTA per tile), 2 (CTA pairs in lockstep) or -1 (choose)", std::to_string(over.cluster));
  TC_CHECK_ARG(over.multicast >= -1 && over.multicast <= 1, kOp, "multicast",
               "1 (CTA pairs share weight boxes by multicast), 0 (each CTA loads its own) or -1 (choose)",
               std::to_string(over.multicast));
  // multicast=1 with the pairs given (cluster=2) or chosen (cluster=-1,
  // checked once chosen, below).
  TC_CHECK_ARG(over.multicast != 1 || over.cluster != 1, kOp, "multicast",
               "multicast=1 only with CTA pairs (cluster=2, given or chosen)", "cluster=1");
  // What cluster=2 needs, for both kernels' checks below.
  constexpr const char* kPairsNeed = "CTA pairs only for the warp-specialised kernel with TMA weights (sm90=2, tma>=1)";
  c.cluster = 1;  // the warp-specialised kernel's choice below
  c.multicast = 0;
  TC_CHECK_ARG(over.stagger >= 0 && over.stagger <= 3, kOp, "stagger",
               "0 (consumer warpgroups in step) or 1..3 (k-steps of lag)", std::to_string(over.stagger));
  c.stagger = over.stagger;  // (the kernels that cannot take it are checked below)
  TC_CHECK_ARG(over.lean_a >= -1 && over.lean_a <= 1, kOp, "lean_a",
               "0 (addresses per k-step), 1 (row addresses per tile) or -1 (choose)", std::to_string(over.lean_a));
  c.lean_a = over.lean_a == 1 ? 1 : 0;  // (chosen on the warp-specialised kernel below)
  TC_CHECK_ARG(over.lean_desc >= -1 && over.lean_desc <= 1, kOp, "lean_desc",
               "0 (descriptors per k-step), 1 (stage 0's once, then adds) or -1 (choose)",
               std::to_string(over.lean_desc));
  c.lean_desc = over.lean_desc == 1 ? 1 : 0;
  TC_CHECK_ARG(over.fill_stores >= -1 && over.fill_stores <= 1, kOp, "fill_stores",
               "0 (every row stored), 1 (padding rows not stored) or -1 (choose)", std::to_string(over.fill_stores));
  c.fill_stores = 0;  // (chosen on the warp-specialised kernel below)
  constexpr const char* kFillNeed =
      "the warp-specialised kernel with tensor stores (sm90=2, tma_store=1), tile_fill given, no fused combine";
  c.gemv = resolve_gemv(a, over, c.block_m);
  if (c.gemv == 1) {
    TC_CHECK_ARG(!mma_overrides(over), kOp, "gemv",
                 "no sm90, tma, tma_store, persistent, k_splits, stages, warps, cluster or multicast override with "
                 "gemv=1",
                 fmt::format("sm90={} tma={} tma_store={} persistent={} k_splits={} stages={} warps={}x{} cluster={} "
                             "multicast={}",
                             over.sm90, over.tma, over.tma_store, over.persistent, over.k_splits, over.stages,
                             over.warps_m, over.warps_n, over.cluster, over.multicast));
    c.sm90 = 0, c.stages = 0, c.warps_m = 1, c.warps_n = 8;
    c.block_n = gemv_block_n(a, over, c.block_m, sm_count);
    TC_CHECK_ARG(over.bulk >= -1 && over.bulk <= 1, kOp, "bulk",
                 "0 (register loads), 1 (bulk copies through shared memory) or -1 (choose)", std::to_string(over.bulk));
    const bool per_row = (c.block_m == 1 && dual && a.combine == 1) || a.combine > 1;
    const std::string why = cc_major < 9                      ? fmt::format("sm_{}x", cc_major)
                            : !per_row                        ? std::string("no per-row schedule")
                            : a.w.layout != WeightLayout::kNK ? std::string("[K, N] weights")
                            : a.num_tiles || a.row_token      ? std::string("a device tile count or row_token")
                            : !bulk_plan(a).fits              ? std::string("a column too large for two stages")
                                                              : std::string();
    TC_CHECK_ARG(over.bulk < 1 || why.empty(), kOp, "bulk",
                 fmt::format("the decode path's per-row projections on sm_90 ([N, K] weights; two stages of one "
                             "column's rows and the A rows within {} KB)",
                             kBulkSmemBytes / 1024),
                 why);
    c.bulk = over.bulk >= 0 ? over.bulk : why.empty() && bulk_by_default(a, sm_count) ? 1 : 0;
    TC_CHECK_ARG(over.bulk_cols == 0 || c.bulk == 1, kOp, "bulk_cols", "the bulk kernel (bulk=1, given or chosen)",
                 fmt::format("bulk_cols={} with register loads (bulk=0)", over.bulk_cols));
    if (over.bulk_cols != 0) {
      const int64_t most = bulk_max_cols(a);
      TC_CHECK_ARG(over.bulk_cols > 0 && over.bulk_cols <= most && bulk_plan(a, over.bulk_cols).fits, kOp, "bulk_cols",
                   fmt::format("0 (choose) or 1..{} output columns per piece ({} weight rows at most, N = {}) whose "
                               "piece leaves room for two stages in {} KB",
                               most, kBulkMaxRows, a.out.shape[1], kBulkSmemBytes / 1024),
                   std::to_string(over.bulk_cols));
    }
    // Resolved: the piece width it runs (a given one is checked above).
    c.bulk_cols = c.bulk != 1 ? 0 : over.bulk_cols > 0 ? over.bulk_cols : bulk_plan(a).cols;
    TC_CHECK_ARG(over.preload >= -1 && over.preload <= 1, kOp, "preload",
                 "0 (none), 1 (the first item's weights into shared memory before the grid wait) or -1 (choose)",
                 std::to_string(over.preload));
    {
      const int64_t bytes = a.combine * int64_t(c.block_n) * a.a.shape[1] * 2;
      const std::string no =
          c.gemv != 1 || a.combine < 2 || !a.schedule_settled
              ? std::string("not the decode combine kernel on a settled schedule")
          : cc_major != 9 ? fmt::format("sm_{}x (sm_90 only)", cc_major)
          : c.bulk == 1   ? std::string("the bulk kernel (bulk=1)")
          : bytes > moe_grouped_gemm_max_preload_bytes
              ? fmt::format("{} bytes per CTA (combine {} x block_n {} x K {} x 2; at most {})", bytes, a.combine,
                            c.block_n, a.a.shape[1], moe_grouped_gemm_max_preload_bytes)
              : std::string();
      TC_CHECK_ARG(over.preload < 1 || no.empty(), kOp, "preload",
                   "the decode combine kernel on a settled schedule, sm_90, within the shared memory limit", no);
      c.preload = over.preload == 1 ? 1 : 0;  // (-1: off; see MoeGroupedGemmConfig::preload)
    }
    TC_CHECK_ARG(over.carveout < 1 || cc_major == 9, kOp, "carveout", "sm_90 (decode kernels)",
                 fmt::format("sm_{}x", cc_major));
    // (-1: where this kernel preloads (preload=1), so that its CTAs, asking
    // for up to 100 KB, find the SMs configured for it.)
    c.carveout = over.carveout == 1 || (over.carveout == -1 && c.preload == 1) ? 1 : 0;
    TC_CHECK_ARG(c.stagger == 0, kOp, "stagger", "the warp-specialised kernel (sm90=2)", c.str());
    TC_CHECK_ARG(c.lean_a == 0, kOp, "lean_a", "the warp-specialised kernel (sm90=2)", c.str());
    TC_CHECK_ARG(c.lean_desc == 0, kOp, "lean_desc", "the warp-specialised kernel (sm90=2)", c.str());
    TC_CHECK_ARG(over.fill_stores < 1, kOp, "fill_stores", kFillNeed, c.str());
    return c;
  }
  TC_CHECK_ARG(over.preload < 1, kOp, "preload", "the decode combine kernel (gemv=1 with combine)", "the MMA kernels");
  TC_CHECK_ARG(over.carveout < 1, kOp, "carveout", "the decode kernels (gemv=1)", "the MMA kernels");
  TC_CHECK_ARG(over.bulk_cols == 0, kOp, "bulk_cols", "the bulk decode kernel (gemv=1, bulk=1)", "the MMA kernels");
  const bool sm90_ok = (c.block_m == 128 || c.block_m == 64) && moe_grouped_gemm_wgmma_ok(a, cc_major);
  TC_CHECK_ARG(over.sm90 >= -1 && over.sm90 <= 2, kOp, "sm90", "0 (mma.sync), 1 (wgmma) or 2 (warp-specialised wgmma)",
               std::to_string(over.sm90));
  TC_CHECK_ARG(over.sm90 < 1 || sm90_ok, kOp, "sm90",
               "the wgmma kernel only for 64- or 128-row tiles, 16-byte aligned rows and compute capability 9.0",
               fmt::format("block_m {}, {} rows, sm_{}x", c.block_m, vector_ok(a) ? "aligned" : "unaligned", cc_major));
  // Default for 128-row tiles: the warp-specialised kernel (with TMA weights
  // where they apply): race case 1 gate/up 14.3 -> 12.4 ms, down 7.9 -> 6.6 ms
  // against the sm90=1 kernel on the H200 (docs/perf/fused_moe.md, v6).
  // Without TMA weights the warp-specialised kernel keeps B chunk offsets
  // inside one expert's matrix in 32 bits; such shapes default to sm90=1
  // (where tma=0 was asked for).
  const bool ws_ok = (tma_ok(a) && over.tma != 0) || N * a.a.shape[1] < (int64_t(1) << 31);
  // 64-row tile schedules (from 9 rows per expert up where the
  // warp-specialised kernel applies, moe_grouped_gemm_block_m): that kernel
  // too. Without a schedule (one group of at most 64 rows: the layer's
  // router GEMM at T <= 64) mma.sync, whose split K spreads the few tiles
  // over the SMs.
  c.sm90 = over.sm90 >= 0     ? over.sm90
           : !sm90_ok         ? 0
           : c.block_m == 128 ? (ws_ok ? 2 : 1)
                              : (ws_ok && a.tile_expert ? 2 : 0);
  TC_CHECK_ARG(over.tma >= -1 && over.tma <= 2, kOp, "tma",
               "0 (cp.async), 1 (weights by TMA), 2 (weights and A by TMA) or -1 (choose)", std::to_string(over.tma));
  TC_CHECK_ARG(
      over.tma < 1 || (c.sm90 == 2 && tma_ok(a)), kOp, "tma",
      "TMA only in the warp-specialised kernel (sm90=2), with 16-byte aligned rows",
      fmt::format("sm90={}, rows {}16-byte aligned", c.sm90, vector_ok(a) ? "" : "not "));
  TC_CHECK_ARG(over.k_splits >= 0 && over.k_splits <= 64, kOp, "k_splits", "0 (choose) or 1..64",
               std::to_string(over.k_splits));
  TC_CHECK_ARG(over.k_splits <= 1 || c.sm90 == 0, kOp, "k_splits", "a split K only for the mma.sync kernel (sm90=0)",
               fmt::format("sm90={}", c.sm90));
  c.k_splits = c.sm90 == 0 && over.k_splits >= 1 ? over.k_splits : 1;  // 0: chosen below (mma.sync)
  TC_CHECK_ARG(over.persistent >= -1 && over.persistent <= 2, kOp, "persistent",
               "0 (one CTA per tile), 1 (static walk), 2 (dynamic tile counter) or -1 (choose)",
               std::to_string(over.persistent));
  TC_CHECK_ARG(over.persistent < 1 || c.sm90 == 2, kOp, "persistent",
               "a persistent grid only for the warp-specialised kernel (sm90=2)", fmt::format("sm90={}", c.sm90));
  TC_CHECK_ARG(over.tma != 2 || (!a.a_index && !a.row_token), kOp, "tma",
               "A by TMA (tma=2) only for A rows read in layout order (no a_index, no row_token)",
               a.a_index ? "an a_index" : "a row_token");
  if (c.sm90) {
    // Gated: 128 gate + 128 up columns; plain: 256 when N fills it. Ring of
    // four to six stages in ~200 KB: one CTA of two warpgroups per SM.
    // 64-row tiles split the columns between the two warpgroups: at least 128.
    const int min_n = c.block_m == 64 ? 128 : 64;
    c.block_n = over.block_n ? over.block_n
                             : std::max(min_n, dual       ? (N <= 64 ? 64 : 128)
                                               : N <= 64  ? 64
                                               : N <= 128 ? 128
                                                          : 256);
    c.warps_m = c.sm90 == 2 ? 3 : 2, c.warps_n = 4;  // warpgroups x 4 warps (ws: one producer + two consumers)
    TC_CHECK_ARG(c.block_n >= min_n, kOp, "block_n",
                 fmt::format("at least {} for {}-row wgmma tiles", min_n, c.block_m), std::to_string(c.block_n));
    // TMA wherever it applies; A too when its rows are read in layout order
    // (the layer's down projection).
    c.tma = c.sm90 != 2 || over.tma == 0 || !tma_ok(a) ? 0 : over.tma > 0 ? over.tma : a.a_index || a.row_token ? 1 : 2;
    TC_CHECK_ARG(c.sm90 != 2 || c.tma >= 1 || N * a.a.shape[1] < (int64_t(1) << 31), kOp, "sm90",
                 "N * K < 2^31 for the warp-specialised kernel with cp.async weights (tma=0)",
                 fmt::format("N = {}, K = {}", N, a.a.shape[1]));
    // Persistent CTAs: a static walk (CTA b takes tiles b, b + 132, ...)
    // lets the CTAs drift apart and lose the grouped order's L2 sharing (race
    // case 1 gate/up 14.7 ms against 13.1 with one CTA per tile), so it stays
    // opt-in. The dynamic tile counter (2) keeps the grouped order and
    // overlaps a tile's epilogue with the next tile's loads: the default. Same
    // runs, against one CTA per tile (H200, docs/perf/fused_moe.md, session
    // 10): down GEMMs 1-5% faster (Qwen3-30B T=4096 295 -> 285 us, DeepSeek-V3
    // T=4096 2.85-2.95 -> 2.73-2.79 ms, race case 1 7.32-7.35 -> 7.24 ms),
    // gate/up within +-2%; whole layers 1-2% faster except DeepSeek-V3 T=4096
    // (-0.3% to +2%).
    c.persistent = c.sm90 != 2 ? 0 : over.persistent >= 0 ? over.persistent : 2;
    // Tensor stores need the TMA launch (it carries the maps) and output rows
    // on 16 bytes (a map's stride); elsewhere the consumers store the staged rows.
    const bool store_ok = c.tma >= 1 && N * dtype_size(a.out.dtype) % 16 == 0;
    TC_CHECK_ARG(over.tma_store >= -1 && over.tma_store <= 1, kOp, "tma_store",
                 "0 (the consumers store), 1 (TMA tensor stores) or -1 (choose)", std::to_string(over.tma_store));
    TC_CHECK_ARG(
        over.tma_store < 1 || store_ok, kOp, "tma_store",
        "the warp-specialised kernel with TMA weights (sm90=2, tma>=1) and output rows of a multiple of 16 bytes",
        fmt::format("sm90={} tma={}, rows of {} bytes", c.sm90, c.tma, N * dtype_size(a.out.dtype)));
    c.tma_store = store_ok && over.tma_store != 0 ? 1 : 0;
    TC_CHECK_ARG(over.cluster != 2 || (c.sm90 == 2 && c.tma >= 1), kOp, "cluster", kPairsNeed,
                 fmt::format("sm90={} tma={}", c.sm90, c.tma));
    c.cluster = over.cluster >= 1 ? over.cluster : pairs_by_default(a, c, dual) ? 2 : 1;
    TC_CHECK_ARG(over.multicast != 1 || c.cluster == 2, kOp, "multicast",
                 "multicast=1 only with CTA pairs (cluster=2, given or chosen)",
                 fmt::format("one CTA per tile chosen for {}", c.str()));
    c.multicast = c.cluster == 2 && over.multicast == 1 ? 1 : 0;
    // Pairs chosen here come with half_skip: their measured win had both.
    if (over.half_skip < 0 && over.cluster < 0 && c.cluster == 2) c.half_skip = 1;
    // The gated projection of many experts (64 or more) holding at most two
    // row tiles each, on single CTAs, also runs one row tile at a time.
    // H200, session 35, against groups of 8 in one process (bench
    // --vs-config gate_up_group_m=1): gate/up Kimi-K2 T=4096 (0.66 tiles per
    // expert) 0.925x, Qwen3-235B T=4096 (2) 0.947x, Qwen3-30B T=4096 (2)
    // 0.979-0.996x; where it lost, outside this rule: Mixtral T=512 (8
    // experts, 1 tile) 1.161x, DeepSeek-V3 T=4096 (CTA pairs) 1.015x;
    // Qwen3-30B T=16384 (8 tiles) 1.006x. The down projection lost or tied
    // (Qwen3-30B T=4096 1.009x).
    const int64_t experts = a.w.num_experts();
    if (over.group_m < 0 && dual && c.cluster == 1 && experts >= 64 && a.rows_used > 0 &&
        a.rows_used <= 2 * int64_t(c.block_m) * experts)
      c.group_m = 1;
    const int stage = c.block_m * kBK * 2 + (dual ? 2 : 1) * c.block_n * kBK * 2;
    // The warp-specialised kernel also holds 32 KB of epilogue staging.
    c.stages = over.stages ? over.stages : std::min(6, (c.sm90 == 2 ? 192 : 200) * 1024 / stage);
    TC_CHECK_ARG(c.block_n == 64 || c.block_n == 128 || c.block_n == 256, kOp, "block_n", "64, 128 or 256 (wgmma)",
                 std::to_string(c.block_n));
    TC_CHECK_ARG(!(dual && c.block_n == 256), kOp, "block_n", "at most 128 for gated tiles (two accumulator sets)",
                 std::to_string(c.block_n));
    TC_CHECK_ARG(c.stages >= 3 && c.stages <= 8, kOp, "stages", "3..8 (wgmma)", std::to_string(c.stages));
    TC_CHECK_ARG(smem_bytes(c, dual) <= kMaxSmem, kOp, "stages",
                 fmt::format("a ring that fits {} KB of shared memory", kMaxSmem / 1024),
                 fmt::format("{} bytes for {}", smem_bytes(c, dual), c.str()));
    TC_CHECK_ARG(
        c.stagger == 0 || (c.sm90 == 2 && c.cluster == 1 && c.stagger >= 1 && c.stagger <= 3 && c.stagger < c.stages),
        kOp, "stagger", "0, or 1..3 below the stages on the warp-specialised kernel with one CTA per tile",
        fmt::format("stagger={} on {}", c.stagger, c.str()));
    // The lean forms wherever they apply: fewer instructions per k-step,
    // and at the 700 W cap instructions cost clock. H200, session 35, both
    // against neither in one process (bench --vs-config): gate/up 0.906x
    // (DeepSeek-V3 T=4096), 0.953x (race 1), 0.964x (race 2), 0.993x
    // (Mixtral and Qwen3-30B T=4096); down 0.996-1.001x.
    if (over.lean_a < 0 && c.sm90 == 2 && c.tma != 2) c.lean_a = 1;
    if (over.lean_desc < 0 && c.sm90 == 2) c.lean_desc = 1;
    TC_CHECK_ARG(c.lean_desc == 0 || c.sm90 == 2, kOp, "lean_desc", "the warp-specialised kernel (sm90=2)", c.str());
    TC_CHECK_ARG(c.lean_a == 0 || (c.sm90 == 2 && c.tma != 2), kOp, "lean_a",
                 "the warp-specialised kernel with A gathered by cp.async (not tma=2)", c.str());
    // Padding rows left unstored up to one row tile per expert on average
    // (a third of the rows or more are padding): at 16 rows per 64-row tile
    // (DeepSeek-V3 T=512) they were 3/4 of each tile's stores, DRAM writes
    // beside a stream bound by its reads. H200, session 36, every row stored
    // against this in one process (bench --vs-config
    // gate_up_fill_stores=0,down_fill_stores=0): down 1.030x (DeepSeek-V3
    // T=512), 1.035x (Kimi-K2 T=512), 1.009x (DeepSeek-V3 T=4096); experts
    // 1.015x and 1.019x on the first two; Mixtral T=512 (8 experts) a tie
    // (0.994-1.014x over three runs). At two row tiles per expert it did not
    // hold: Qwen3-235B T=4096 experts 1.017x in one run, 0.986x / 0.992x in
    // two more; Qwen3-30B T=4096 0.996x, 0.988x, 1.012x.
    const bool fill_ok = c.sm90 == 2 && c.tma_store == 1 && a.tile_fill && !a.combine_into;
    TC_CHECK_ARG(over.fill_stores < 1 || fill_ok, kOp, "fill_stores", kFillNeed, c.str());
    c.fill_stores = fill_ok && (over.fill_stores == 1 || (over.fill_stores < 0 && a.rows_used > 0 &&
                                                          a.rows_used <= int64_t(c.block_m) * a.w.num_experts()))
                        ? 1
                        : 0;
    return c;
  }
  // Gated: 64 gate + 64 up columns per tile; plain: 128 (64 when N is small).
  c.block_n = over.block_n ? over.block_n : (dual || N <= 64 ? 64 : 128);
  TC_CHECK_ARG(over.cluster != 2, kOp, "cluster", kPairsNeed, "the mma.sync kernel");
  TC_CHECK_ARG(over.multicast != 1, kOp, "multicast", "CTA pairs (cluster=2) on the warp-specialised kernel",
               "the mma.sync kernel");
  if (over.k_splits == 0) c.k_splits = auto_k_splits(a, c, sm_count);
  c.warps_m = over.warps_m ? over.warps_m : (c.block_m >= 128 ? 2 : 1);
  c.warps_n = over.warps_n ? over.warps_n : 4;
  // Deep rings for short tiles (decode streams weights), 3 for 128-row tiles:
  // ~96 KB per CTA, two CTAs per SM.
  c.stages = over.stages ? over.stages : (c.block_m <= 32 ? 5 : c.block_m == 64 ? 4 : 3);
  TC_CHECK_ARG(c.block_m == 16 || c.block_m == 32 || c.block_m == 64 || c.block_m == 128, kOp, "block_m",
               "16, 32, 64 or 128", std::to_string(c.block_m));
  TC_CHECK_ARG(c.block_n == 64 || c.block_n == 128 || c.block_n == 256, kOp, "block_n", "64, 128 or 256",
               std::to_string(c.block_n));
  TC_CHECK_ARG(c.stages >= 2 && c.stages <= 8, kOp, "stages", "2..8", std::to_string(c.stages));
  TC_CHECK_ARG(c.warps_m >= 1 && c.block_m % (16 * c.warps_m) == 0, kOp, "warps_m",
               fmt::format("a count that splits block_m = {} into multiples of 16 rows", c.block_m),
               std::to_string(c.warps_m));
  TC_CHECK_ARG(c.warps_n >= 1 && c.block_n % (16 * c.warps_n) == 0, kOp, "warps_n",
               fmt::format("a count that splits block_n = {} into multiples of 16 columns", c.block_n),
               std::to_string(c.warps_n));
  TC_CHECK_ARG(c.warps_m * c.warps_n <= 16, kOp, "warps_m*warps_n", "at most 16 warps",
               std::to_string(c.warps_m * c.warps_n));
  // fp32 accumulators per thread, against the registers a thread may have
  // (sm_90a, ptxas): with up to 8 warps, 128 take 226-232 registers and
  // spill nothing, 256 (bm=128 bn=128 on 2x2 warps, gated) spill 1.2-18 KB;
  // with 16 warps (128 registers a thread) 32 spill nothing, 64 spill 8-12
  // bytes, 128 spill 5-6 KB. Warps across N not given double until the tile
  // fits; a tile or split that does not fit is refused.
  const auto accumulators = [&] { return c.block_m / c.warps_m * (c.block_n / c.warps_n) / 32 * (dual ? 2 : 1); };
  const auto fits = [&] { return accumulators() <= (c.warps_m * c.warps_n <= 8 ? 128 : 64); };
  while (!over.warps_n && !fits() && c.warps_m * c.warps_n * 2 <= 16 && c.block_n % (32 * c.warps_n) == 0)
    c.warps_n *= 2;
  TC_CHECK_ARG(fits(), kOp, over.warps_m || over.warps_n ? "warps_m*warps_n" : "block_m*block_n",
               "at most 128 fp32 accumulators per thread with up to 8 warps, 64 with more: (block_m / warps_m) x "
               "(block_n / warps_n) / 32, twice that gated",
               fmt::format("{} for {}", accumulators(), c.str()));
  // A chosen depth gives way to a tile the overrides made large (128 x 256
  // gated: 240 KB at 3 stages); a depth given is taken as it is.
  while (!over.stages && c.stages > 2 && smem_bytes(c, dual) > kMaxSmem) --c.stages;
  TC_CHECK_ARG(smem_bytes(c, dual) <= kMaxSmem, kOp, over.stages ? "stages" : "block_m*block_n",
               fmt::format("a ring that fits {} KB of shared memory", kMaxSmem / 1024),
               fmt::format("{} bytes for {}", smem_bytes(c, dual), c.str()));
  TC_CHECK_ARG(c.stagger == 0, kOp, "stagger", "the warp-specialised kernel (sm90=2)", c.str());
  TC_CHECK_ARG(c.lean_a == 0, kOp, "lean_a", "the warp-specialised kernel (sm90=2)", c.str());
  TC_CHECK_ARG(c.lean_desc == 0, kOp, "lean_desc", "the warp-specialised kernel (sm90=2)", c.str());
  TC_CHECK_ARG(over.fill_stores < 1, kOp, "fill_stores", kFillNeed, c.str());
  return c;
}

}  // namespace

MoeGroupedGemmConfig moe_grouped_gemm_config(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over,
                                             int cc_major, int sm_count) {
  MoeGroupedGemmConfig c = choose_config(a, over, cc_major, sm_count);
  // Expert-aligned groups need groups to align (group_m >= 2), experts to
  // align them to (a tile schedule) and a boundary that stays above the
  // group before it (group_align < group_m).
  const bool align_ok = c.sm90 == 2 && c.tma >= 1 && c.group_m >= 2 && a.tile_expert;
  TC_CHECK_ARG(over.group_align >= -1 && over.group_align <= tc::moe::kMaxGroupAlign &&
                   (over.group_align < 1 || (align_ok && over.group_align < c.group_m)),
               kOp, "group_align",
               fmt::format("0 (groups of group_m row tiles), 1..min({}, group_m - 1) (boundaries moved back to an "
                           "expert's first tile that many tiles back; needs a tile schedule, group_m >= 2 and the "
                           "warp-specialised kernel with TMA weights) or -1 (choose)",
                           tc::moe::kMaxGroupAlign),
               fmt::format("group_align={} with group_m={}{} on {}", over.group_align, c.group_m,
                           a.tile_expert ? "" : ", no tile_expert", c.str()));
  // Chosen (3, or group_m - 1) on the warp-specialised kernel with TMA
  // weights and the dynamic scheduler (whose publisher decodes the order a
  // ring ahead of the consumers) where one expert's weights for the projection take 16 MiB or
  // more: there a straddling expert's weights, streamed again by the next
  // group a wave later, no longer sit in the L2 (60 MB on the H200). H200,
  // session 37, group_align=3 against groups of 8 in one process (bench
  // --vs-config): DeepSeek-V3 T=4096 experts 0.979x twice (gate/up
  // 0.971-0.982x, down 0.972-0.976x; ncu: DRAM reads 17.63 -> 16.57 GB on
  // gate/up, 8.28 -> 7.89 GB on down), Mixtral T=4096 0.987x (gate/up
  // 0.984x), race case 1 0.996x; under it, Qwen3-30B T=4096's down
  // projection (3 MB per expert) 1.022-1.029x, Qwen3-235B T=4096's (12.6 MB)
  // 1.007x.
  const int64_t expert_bytes =
      a.out.shape[1] * a.a.shape[1] * int64_t(dtype_size(a.a.dtype)) * (a.w_up.has_value() ? 2 : 1);
  const bool align_default = align_ok && c.persistent == 2 && expert_bytes >= (int64_t(16) << 20);
  c.group_align = over.group_align >= 0 ? over.group_align
                  : align_default       ? std::min(tc::moe::kMaxGroupAlign, c.group_m - 1)
                                        : 0;
  return c;
}

}  // namespace tilecraft::ops
