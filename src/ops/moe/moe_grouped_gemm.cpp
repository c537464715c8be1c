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
#include "ops/moe/tma_map.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/ops/moe_reduce_fused.h"
#include "tilecraft/reference/fused_moe.h"
#include "tilecraft/reference/moe_grouped_gemm.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {
namespace {

constexpr const char* kOp = "moe_grouped_gemm";
constexpr int kBK = 64;                  // tc::moe::kGemmBK
constexpr int kSmallTable = 64;          // pointer tables carried in the launch parameters
constexpr int kLargeTable = 512;
constexpr int kMaxSmem = 227 * 1024;     // sm_90 opt-in shared memory per block

// Layout rows M: out's rows, times the slots each output row sums (combine).
int64_t layout_rows(const MoeGroupedGemmArgs& a) { return a.out.shape[0] * std::max<int64_t>(a.combine, 1); }

int table_size(const MoeGroupedGemmArgs& a) {
  if (a.w.stacked) return 0;
  return a.w.num_experts() <= kSmallTable ? kSmallTable : kLargeTable;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16-byte loads need every row start 16-byte aligned: K (and N for the KN
// layout) multiples of 8 elements and 16-byte aligned bases.
bool vector_ok(const MoeGroupedGemmArgs& a) {
  const int64_t K = a.a.shape[1], N = a.out.shape[1];
  // [K, N] weights load along N; output pairs need even rows.
  if (K % 8 || !aligned16(a.a.data) || !aligned16(a.out.data) || N % (a.w.layout == WeightLayout::kKN ? 8 : 2))
    return false;
  auto weights_ok = [&](const ExpertWeights& w) {
    if (w.stacked) return aligned16(w.stacked->data);
    for (auto& t : w.per_expert)
      if (!aligned16(t.data)) return false;
    return true;
  };
  return weights_ok(a.w) && (!a.w_up || weights_ok(*a.w_up));
}

// TMA weights: the maps travel in the launch parameters (one per expert
// matrix when given per pointer: 64 experts x 2 matrices x 128 bytes = 16 KB);
// strides are multiples of 16 bytes whenever vector_ok holds.
bool tma_ok(const MoeGroupedGemmArgs& a) { return vector_ok(a) && table_size(a) <= kSmallTable; }

// Entries of the launch's table: pointers (table_size), or for TMA weights
// maps sized to the experts (8, 16, 32 or 64: 128 bytes per map and matrix,
// so the race's 8 experts launch with 2 KB of maps, not 16 KB).
int launch_table(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  if (c.tma < 1 || a.w.stacked) return table_size(a);
  int n = 8;
  while (n < a.w.num_experts()) n *= 2;
  return n;
}

int smem_bytes(const MoeGroupedGemmConfig& c, bool dual) {
  if (c.gemv == 1) return 0;  // static shared memory only (the tile's compacted rows)
  const int ring = c.stages * (c.block_m * kBK * 2 + (dual ? 2 : 1) * c.block_n * kBK * 2) + c.block_m * 4;
  // sm90: slack to align the ring to 1024 bytes (swizzle atoms); the
  // warp-specialised kernel adds a full and an empty mbarrier per stage and
  // its tile ring (4 mbarriers, 2 indices, 2 x 3 words of decoded tiles)
  // and its consumers' epilogue staging.
  return c.sm90 ? ring + 1024 + (c.sm90 == 2 ? 16 * c.stages + 96 + tc::moe::kGemmWsStagingBytes : 0) : ring;
}

void check_weights(const ExpertWeights& w, const char* arg, DType dtype, int64_t N, int64_t K, DeviceType backend) {
  const bool kn = w.layout == WeightLayout::kKN;
  const Shape one = kn ? Shape{K, N} : Shape{N, K};
  const std::string want_one = kn ? fmt::format("[K, N] = [{}, {}]", K, N) : fmt::format("[N, K] = [{}, {}]", N, K);
  if (w.stacked) {
    check_tensor(*w.stacked, kOp, arg, {dtype}, 3, backend);
    const int64_t E = w.stacked->shape[0];
    TC_CHECK_ARG(E >= 1 && w.stacked->shape == Shape({E, one[0], one[1]}), kOp, arg,
                 fmt::format("stacked experts [E, {}, {}] ({} layout, {} per expert)", one[0], one[1],
                             weight_layout_name(w.layout), want_one),
                 w.stacked->describe());
    return;
  }
  TC_CHECK_ARG(!w.per_expert.empty(), kOp, arg, "a stacked tensor or one tensor per expert", "no tensors");
  TC_CHECK_ARG(int64_t(w.per_expert.size()) <= kLargeTable, kOp, arg,
               fmt::format("at most {} per-expert tensors", kLargeTable), std::to_string(w.per_expert.size()));
  for (size_t e = 0; e < w.per_expert.size(); ++e) {
    const std::string name = fmt::format("{}[{}]", arg, e);
    check_tensor(w.per_expert[e], kOp, name.c_str(), {dtype}, 2, backend);
    TC_CHECK_ARG(w.per_expert[e].shape == one, kOp, name,
                 fmt::format("{} ({} layout)", want_one, weight_layout_name(w.layout)), w.per_expert[e].describe());
  }
}

std::vector<const void*> bases(const ExpertWeights& w, int64_t N, int64_t K) {
  std::vector<const void*> out;
  const int64_t E = w.num_experts();
  for (int64_t e = 0; e < E; ++e) {
    if (w.stacked)
      out.push_back(static_cast<const char*>(w.stacked->data) + e * N * K * int64_t(dtype_size(w.stacked->dtype)));
    else
      out.push_back(w.per_expert[size_t(e)].data);
  }
  return out;
}

// The bulk decode kernels' shared memory (grouped_gemv_bulk.cuh): two
// buffers of an output row's A rows (one x row gated, else one h row per
// slot; one buffer where there is one output row), then the ring. A piece
// is `cols` output columns of U weight rows each (U = 2 gated, else
// combine), one stage; as many stages as the rest holds (at most 8, two
// consumer warps each). fits: at least two stages. By default (cols 0)
// stages of about 32 KB, but two columns rather than one where two still
// leave four stages: a one-column gated piece gives each consumer warp one
// row to dot (H200, T = 1, E = 128, K = 8, experts scope, us: H = 5120
// one column 110.6-110.7, two 104.3-104.5, three 108.4-108.5; H = 4096
// one 96.1-96.2 against two 82.1-82.9; Mixtral T = 1 one 206.5-207.1
// against two 171.2-171.3). At H = 7168 two columns leave three stages:
// one column there (session 21's measurements). `cols` > 0 sets the piece
// width (bulk_cols). 216 KB leaves room on each SM for one CTA of
// the next kernel (the register down projection), which launches early and
// prefetches its weights while gate/up drains. (Measured on the H200 with
// 224 KB as well: the 216 KB runs were no slower; docs/perf, session 21.)
constexpr int64_t kBulkSmemBytes = 216 * 1024;  // at most tc::moe::kBulkDynamicSmem (the kernel checks the static part fits)
constexpr int kBulkThreads = 544;               // tc::moe::kBulkThreads
constexpr int kBulkMaxRows = 64;                // tc::moe::kBulkMaxRows
struct BulkPlan {
  int cols = 0, stages = 0, abufs = 2;
  int64_t stage_bytes = 0, a_bytes = 0;
  bool fits = false;
  int64_t smem() const { return abufs * a_bytes + stages * stage_bytes; }
};
// The widest piece the kernel takes: kBulkMaxRows weight rows, N columns.
int64_t bulk_max_cols(const MoeGroupedGemmArgs& a) {
  const int64_t U = a.w_up ? 2 : a.combine;
  return std::max<int64_t>(1, std::min<int64_t>(a.out.shape[1], kBulkMaxRows / std::max<int64_t>(U, 1)));
}
BulkPlan bulk_plan(const MoeGroupedGemmArgs& a, int cols = 0) {
  const int64_t U = a.w_up ? 2 : a.combine, AU = a.w_up ? 1 : a.combine, K = a.a.shape[1];
  const int64_t row = K * int64_t(dtype_size(a.a.dtype)), unit = U * row;
  BulkPlan b;
  b.a_bytes = AU * row;
  b.abufs = a.out.shape[0] > 1 ? 2 : 1;
  const auto stages_of = [&](int64_t c) {
    return int(std::clamp<int64_t>((kBulkSmemBytes - b.abufs * b.a_bytes) / (c * unit), 0, 8));
  };
  if (cols > 0) {
    b.cols = cols;
  } else {
    b.cols = int(std::clamp<int64_t>((32 << 10) / std::max<int64_t>(unit, 1), 1, bulk_max_cols(a)));
    if (b.cols == 1 && bulk_max_cols(a) >= 2 && stages_of(2) >= 4) b.cols = 2;
  }
  b.stage_bytes = b.cols * unit;
  b.stages = stages_of(b.cols);
  b.fits = b.stages >= 2 && U <= 32;
  return b;
}

// bulk = -1 (where bulk applies): the gated projection when it streams at
// least 896 KiB of weights per SM. Below that the ring's fill and the one
// CTA per SM cost more than the register kernel's many narrow CTAs. H200,
// T = 1, E = 128, K = 8 (ad-hoc shapes but the two Qwen3), the L2 flush of
// session 31, bulk against register loads, experts scope, us (docs/perf,
// session 32): 0.36 MiB per SM (Qwen3-30B) 30.5-30.7 against 29.0-29.3;
// 0.48 MiB 36.5-36.6 against 36.0-36.3 (layer 1.2-1.8 slower); 0.73 MiB
// 47.4-48.5 against 48.2-48.5 (layer a tie); 0.97 MiB 59.2-59.3 against
// 59.5-59.6; 1.09 MiB 66.0-66.3 against 67.1-67.3; 1.45 MiB (Qwen3-235B)
// 81.9-82.9 against 83.7-84.8 (layer 2.3-3.0 faster); 1.82 MiB (H = 5120,
// two columns per piece) 104.3-104.5 against 107.1-107.6; 3.4 MiB
// (DeepSeek-V3, Mixtral; session 21) 112-117 against 118-121. (Session
// 21's L2 flush left earlier kernels' lines in the L2 and had Qwen3-235B a
// tie; the default then began at 2 MiB.)
bool bulk_by_default(const MoeGroupedGemmArgs& a, int sm_count) {
  if (!a.w_up) return false;
  const int64_t bytes = layout_rows(a) * a.out.shape[1] * 2 * a.a.shape[1] * int64_t(dtype_size(a.a.dtype));
  // (sm_count 0: no GPU, a compile-only run for sm_90a; take the H100 and
  // H200's 132 SMs, so it compiles what those would run.)
  return bytes >= (int64_t(896) << 10) * (sm_count > 0 ? sm_count : 132);
}

int64_t block_m_of(const MoeGroupedGemmArgs& a) {
  if (!a.tile_expert) return 0;
  const int64_t tiles = a.tile_expert->shape[0], M = layout_rows(a);
  return tiles > 0 ? M / tiles : 0;
}

}  // namespace

const char* weight_layout_name(WeightLayout l) { return l == WeightLayout::kNK ? "NK" : "KN"; }

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

void validate_moe_grouped_gemm(const MoeGroupedGemmArgs& a, DeviceType backend) {
  check_tensor(a.a, kOp, "a", {DType::kF16, DType::kBF16}, 2, backend);
  const DType dt = a.a.dtype;
  const int64_t K = a.a.shape[1];
  check_tensor(a.out, kOp, "out", {dt, DType::kF32}, 2, backend);
  TC_CHECK_ARG(a.combine >= 1 && a.combine <= 32, kOp, "combine", "1..32 rows summed per output row",
               std::to_string(a.combine));
  TC_CHECK_ARG(a.a_repeat >= 1 && a.a_repeat <= INT_MAX, kOp, "a_repeat", "1..2^31-1 layout rows per row of a",
               std::to_string(a.a_repeat));
  const int64_t M = layout_rows(a), N = a.out.shape[1];
  TC_CHECK_ARG(K >= 1 && K <= INT_MAX, kOp, "a", "K (columns) in 1..2^31-1", a.a.describe());
  TC_CHECK_ARG(N >= 1 && N <= INT_MAX && M <= INT_MAX && a.a.shape[0] <= INT_MAX, kOp, "out",
               "N >= 1 and fewer than 2^31 rows and columns", a.out.describe());
  check_weights(a.w, "w", dt, N, K, backend);
  const int64_t E = a.w.num_experts();
  if (a.w_up) {
    check_weights(*a.w_up, "w_up", dt, N, K, backend);
    TC_CHECK_ARG(a.w_up->num_experts() == E, kOp, "w_up", fmt::format("{} experts (as w)", E),
                 std::to_string(a.w_up->num_experts()));
    TC_CHECK_ARG(a.w_up->layout == a.w.layout && a.w_up->stacked.has_value() == a.w.stacked.has_value(), kOp, "w_up",
                 "the layout and form (stacked or per expert) of w",
                 fmt::format("{} {}", weight_layout_name(a.w_up->layout), a.w_up->stacked ? "stacked" : "per expert"));
  }
  if (a.a_index) {
    check_tensor(*a.a_index, kOp, "a_index", {DType::kI32}, Shape{M}, backend);
    TC_CHECK_ARG(a.a_repeat == 1, kOp, "a_repeat", "1 with an a_index", std::to_string(a.a_repeat));
  } else {
    const int64_t need = (M + a.a_repeat - 1) / a.a_repeat;
    TC_CHECK_ARG(a.a.shape[0] >= need, kOp, "a",
                 fmt::format("at least {} rows (M = {} layout rows, a_repeat {}, no a_index)", need, M, a.a_repeat),
                 a.a.describe());
  }
  if (a.tile_expert) {
    check_tensor(*a.tile_expert, kOp, "tile_expert", {DType::kI32}, 1, backend);
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
  if (a.num_tiles) check_tensor(*a.num_tiles, kOp, "num_tiles", {DType::kI32}, Shape{1}, backend);
  if (a.row_scale) check_tensor(*a.row_scale, kOp, "row_scale", {DType::kF32}, Shape{M}, backend);
  if (a.row_token) check_tensor(*a.row_token, kOp, "row_token", {DType::kI32}, Shape{M}, backend);
  if (a.tile_fill) check_tensor(*a.tile_fill, kOp, "tile_fill", {DType::kI32}, Shape{M}, backend);
  if (a.combine_into) {
    const auto& ci = *a.combine_into;
    check_tensor(ci.pos, kOp, "combine_into.pos", {DType::kI32}, 2, backend);
    const int64_t T = ci.pos.shape[0], S = ci.pos.shape[1];
    TC_CHECK_ARG(S >= 1 && S <= 32 && T <= INT_MAX, kOp, "combine_into.pos",
                 "[T, S] with 1..32 slots per token and T < 2^31", ci.pos.describe());
    if (ci.weights) check_tensor(*ci.weights, kOp, "combine_into.weights", {DType::kF32}, Shape{T, S}, backend);
    check_tensor(ci.row_token, kOp, "combine_into.row_token", {DType::kI32}, Shape{M}, backend);
    check_tensor(ci.out, kOp, "combine_into.out", {a.out.dtype}, Shape{T, N}, backend);
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

std::string moe_grouped_gemm_combine_blocker(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c,
                                             int64_t slots) {
  if (c.sm90 != 2 || c.tma != 2 || c.tma_store != 1 || c.gemv == 1)
    return fmt::format("{} (the warp-specialised kernel with A, weights and stores by TMA)", c.str());
  if (c.cluster == 2) return "cluster=2 (one CTA per tile only)";
  if (a.w_up || a.combine != 1) return "a gated projection or a decode combine";
  if (!a.tile_expert) return "no tile schedule";
  if (a.out.dtype == DType::kF32 || a.out.shape[1] % 8) return fmt::format("out {}", a.out.describe());
  if (slots < 1 || slots > 32) return fmt::format("{} slots per token (at most 32)", slots);
  return "";
}

namespace {

// Output tiles that can hold rows: each expert's rows are padded to the
// tile, so sum of ceil(r_e / block_m) <= used / block_m + (experts holding
// rows), with used = rows_used (else M).
int64_t live_tiles_bound(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  const int64_t M = layout_rows(a), N = a.out.shape[1], E = a.w.num_experts();
  const int64_t used = a.rows_used > 0 ? std::min(a.rows_used, M) : M;
  const int64_t row_tiles = std::min<int64_t>((M + c.block_m - 1) / c.block_m, used / c.block_m + std::min(E, used));
  return std::max<int64_t>(row_tiles, 1) * ((N + c.block_n - 1) / c.block_n);
}

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
  return dual && c.sm90 == 2 && c.tma >= 1 && c.block_m == 128 && experts >= 256 &&
         4 * a.rows_used >= 3 * tile_rows && 4 * a.rows_used <= 5 * tile_rows;
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
  const std::vector<int> widths = a.combine > 1 ? std::vector<int>{16, 8}
                                                : std::vector<int>{dual ? 32 : 64, dual ? 16 : 32};
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
    TC_CHECK_ARG(over.block_m == sched_bm, kOp, "block_m", fmt::format("{} (the tile schedule's tile height)", sched_bm),
                 std::to_string(over.block_m));
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
               "1 (one CTA per tile), 2 (CTA pairs in lockstep) or -1 (choose)",
               std::to_string(over.cluster));
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
    const std::string why = cc_major < 9                              ? fmt::format("sm_{}x", cc_major)
                            : !per_row                                ? std::string("no per-row schedule")
                            : a.w.layout != WeightLayout::kNK         ? std::string("[K, N] weights")
                            : a.num_tiles || a.row_token              ? std::string("a device tile count or row_token")
                            : !bulk_plan(a).fits                      ? std::string("a column too large for two stages")
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
      TC_CHECK_ARG(over.bulk_cols > 0 && over.bulk_cols <= most && bulk_plan(a, over.bulk_cols).fits, kOp,
                   "bulk_cols",
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
      const std::string no = c.gemv != 1 || a.combine < 2 || !a.schedule_settled
                                  ? std::string("not the decode combine kernel on a settled schedule")
                              : cc_major != 9 ? fmt::format("sm_{}x (sm_90 only)", cc_major)
                              : c.bulk == 1   ? std::string("the bulk kernel (bulk=1)")
                              : bytes > moe_grouped_gemm_max_preload_bytes
                                  ? fmt::format("{} bytes per CTA (combine {} x block_n {} x K {} x 2; at most {})", bytes,
                                                a.combine, c.block_n, a.a.shape[1], moe_grouped_gemm_max_preload_bytes)
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
  TC_CHECK_ARG(over.preload < 1, kOp, "preload", "the decode combine kernel (gemv=1 with combine)",
               "the MMA kernels");
  TC_CHECK_ARG(over.carveout < 1, kOp, "carveout", "the decode kernels (gemv=1)", "the MMA kernels");
  TC_CHECK_ARG(over.bulk_cols == 0, kOp, "bulk_cols", "the bulk decode kernel (gemv=1, bulk=1)", "the MMA kernels");
  const bool sm90_ok = (c.block_m == 128 || c.block_m == 64) && moe_grouped_gemm_wgmma_ok(a, cc_major);
  TC_CHECK_ARG(over.sm90 >= -1 && over.sm90 <= 2, kOp, "sm90",
               "0 (mma.sync), 1 (wgmma) or 2 (warp-specialised wgmma)", std::to_string(over.sm90));
  TC_CHECK_ARG(over.sm90 < 1 || sm90_ok, kOp, "sm90",
               "the wgmma kernel only for 64- or 128-row tiles, 16-byte aligned rows and compute capability 9.0",
               fmt::format("block_m {}, {} rows, sm_{}x", c.block_m, vector_ok(a) ? "aligned" : "unaligned", cc_major));
  // Default for 128-row tiles: the warp-specialised kernel (with TMA weights
  // where they apply): race case 1 gate/up 14.3 -> 12.4 ms, down 7.9 -> 6.6 ms
  // against the sm90=1 kernel on the H200 (docs/perf/fused_moe.md, v6).
  // Without TMA weights the warp-specialised kernel keeps B chunk offsets
  // inside one expert's matrix in 32 bits; such shapes default to sm90=1.
  const bool ws_ok = tma_ok(a) || N * a.a.shape[1] < (int64_t(1) << 31);
  // 64-row tile schedules (from 9 rows per expert up where the
  // warp-specialised kernel applies, moe_grouped_gemm_block_m): that kernel
  // too. Without a schedule (one group of at most 64 rows: the layer's
  // router GEMM at T <= 64) mma.sync, whose split K spreads the few tiles
  // over the SMs.
  c.sm90 = over.sm90 >= 0      ? over.sm90
           : !sm90_ok          ? 0
           : c.block_m == 128  ? (ws_ok ? 2 : 1)
                               : (ws_ok && a.tile_expert ? 2 : 0);
  TC_CHECK_ARG(over.tma >= -1 && over.tma <= 2, kOp, "tma",
               "0 (cp.async), 1 (weights by TMA), 2 (weights and A by TMA) or -1 (choose)", std::to_string(over.tma));
  TC_CHECK_ARG(over.tma < 1 || (c.sm90 == 2 && tma_ok(a)), kOp, "tma",
               "TMA only in the warp-specialised kernel (sm90=2), with stacked weights or at most 64 per-expert tensors",
               fmt::format("sm90={}, {} expert tensors", c.sm90, a.w.stacked ? 0 : a.w.per_expert.size()));
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
                             : std::max(min_n, dual ? (N <= 64 ? 64 : 128) : N <= 64 ? 64 : N <= 128 ? 128 : 256);
    c.warps_m = c.sm90 == 2 ? 3 : 2, c.warps_n = 4;  // warpgroups x 4 warps (ws: one producer + two consumers)
    TC_CHECK_ARG(c.block_n >= min_n, kOp, "block_n", fmt::format("at least {} for {}-row wgmma tiles", min_n, c.block_m),
                 std::to_string(c.block_n));
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
    TC_CHECK_ARG(over.tma_store < 1 || store_ok, kOp, "tma_store",
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
    TC_CHECK_ARG(c.block_n == 64 || c.block_n == 128 || c.block_n == 256, kOp, "block_n",
                 "64, 128 or 256 (wgmma)", std::to_string(c.block_n));
    TC_CHECK_ARG(!(dual && c.block_n == 256), kOp, "block_n", "at most 128 for gated tiles (two accumulator sets)",
                 std::to_string(c.block_n));
    TC_CHECK_ARG(c.stages >= 3 && c.stages <= 8, kOp, "stages", "3..8 (wgmma)", std::to_string(c.stages));
    TC_CHECK_ARG(smem_bytes(c, dual) <= kMaxSmem, kOp, "stages",
                 fmt::format("a ring that fits {} KB of shared memory", kMaxSmem / 1024),
                 fmt::format("{} bytes for {}", smem_bytes(c, dual), c.str()));
    TC_CHECK_ARG(c.stagger == 0 || (c.sm90 == 2 && c.cluster == 1 && c.stagger >= 1 && c.stagger <= 3 &&
                                    c.stagger < c.stages),
                 kOp, "stagger", "0, or 1..3 below the stages on the warp-specialised kernel with one CTA per tile",
                 fmt::format("stagger={} on {}", c.stagger, c.str()));
    // The lean forms wherever they apply: fewer instructions per k-step,
    // and at the 700 W cap instructions cost clock. H200, session 35, both
    // against neither in one process (bench --vs-config): gate/up 0.906x
    // (DeepSeek-V3 T=4096), 0.953x (race 1), 0.964x (race 2), 0.993x
    // (Mixtral and Qwen3-30B T=4096); down 0.996-1.001x.
    if (over.lean_a < 0 && c.sm90 == 2 && c.tma != 2) c.lean_a = 1;
    if (over.lean_desc < 0 && c.sm90 == 2) c.lean_desc = 1;
    TC_CHECK_ARG(c.lean_desc == 0 || c.sm90 == 2, kOp, "lean_desc", "the warp-specialised kernel (sm90=2)",
                 c.str());
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
  TC_CHECK_ARG(smem_bytes(c, dual) <= kMaxSmem, kOp, "stages",
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

jit::KernelSpec moe_grouped_gemm_kernel_spec(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  const bool dual = a.w_up.has_value(), vec = vector_ok(a);
  const int table = launch_table(a, c);
  const WeightLayout layout = a.w.layout;
  const std::string cfg = fmt::format("{}->{} {} {}{}{}{}", dtype_name(a.a.dtype), dtype_name(a.out.dtype), c.str(),
                                      weight_layout_name(layout), dual ? " silu*up" : "", vec ? "" : " scalar-loads",
                                      table ? fmt::format(" ptr-table{}", table) : "");
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
               "a launch that can fuse the combine (moe_grouped_gemm_combine_blocker)", why);
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
// it to `launch`.
template <typename Launch>
void launch_tma(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c, const tc::moe::GroupedGemmParams& p,
                int table, const Launch& launch) {
  const int64_t N = a.out.shape[1], K = a.a.shape[1], matrix_bytes = N * K * 2;
  auto fill = [&](auto& L) {
    L.p = p;
    const int64_t a_rows = a.a.shape[0];
    if (c.tma == 2) encode_tma_map(L.a_map, a.a.data, a.a.dtype, {K, a_rows, 1}, {K * 2, a_rows * K * 2}, {kBK, c.block_m});
    if (c.tma_store == 1) {  // [M][N] output in boxes of 64 rows x 128 bytes (GroupedGemmSm90Ws::store_tile_tma)
      const int64_t M = a.out.shape[0], row_bytes = N * dtype_size(a.out.dtype);
      encode_tma_map(L.c_map, a.out.data, a.out.dtype, {N, M, 1}, {row_bytes, M * row_bytes},
                     {int(128 / dtype_size(a.out.dtype)), 64});
    }
    const ExpertWeights* w[2] = {&a.w, a.w_up ? &*a.w_up : nullptr};
    for (int m = 0; m < 2 && w[m]; ++m) {
      if (w[m]->stacked)
        encode_weight_map(L.map[m][0], w[m]->stacked->data, a.a.dtype, a.w.layout, N, K, w[m]->num_experts(),
                          matrix_bytes, c.block_n);
      else
        for (size_t e = 0; e < w[m]->per_expert.size(); ++e)
          encode_weight_map(L.map[m][e], w[m]->per_expert[e].data, a.a.dtype, a.w.layout, N, K, 1, matrix_bytes,
                            c.block_n);
    }
    launch(&L);
  };
  auto fill_table = [&](auto& L) {
    std::memset(&L, 0, sizeof(L));
    fill(L);
  };
  switch (table) {
    case 0: {
      tc::moe::GroupedGemmTmaLaunch<1> L;
      return fill_table(L);
    }
    case 8: {
      tc::moe::GroupedGemmTmaLaunch<8> L;
      return fill_table(L);
    }
    case 16: {
      static thread_local tc::moe::GroupedGemmTmaLaunch<16> L;  // 4 KB and up: off the stack
      return fill_table(L);
    }
    case 32: {
      static thread_local tc::moe::GroupedGemmTmaLaunch<32> L;
      return fill_table(L);
    }
    default: {
      static thread_local tc::moe::GroupedGemmTmaLaunch<kSmallTable> L;
      return fill_table(L);
    }
  }
}

void moe_grouped_gemm(const MoeGroupedGemmArgs& a, CUstream stream, const MoeGroupedGemmOptions& o) {
  validate_moe_grouped_gemm(a, DeviceType::kCUDA);
  const int64_t M = layout_rows(a), N = a.out.shape[1], K = a.a.shape[1];
  if (M == 0) return;
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
  rt::ensure_context(a.a.device.index);

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
    launch_tma(a, c, p, table, launch_main);
    return;
  }
  if (table == 0) {
    p.b[0] = a.w.stacked->data;
    p.b[1] = a.w_up ? a.w_up->stacked->data : nullptr;
    p.b_expert_stride = N * K;
    tc::moe::GroupedGemmLaunch<1> L{p, {}};
    launch_main(&L);
    return;
  }
  auto fill = [&](auto& L) {
    L.p = p;
    const auto w = bases(a.w, N, K);
    for (size_t e = 0; e < w.size(); ++e) L.table.ptr[0][e] = w[e];
    if (a.w_up) {
      const auto u = bases(*a.w_up, N, K);
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
  const auto w = bases(a.w, N, K);
  const auto u = a.w_up ? bases(*a.w_up, N, K) : std::vector<const void*>();
  reference::MoeGroupedGemmRef r{};
  const TensorView A = a.a;
  r.load_a = [A, K](int64_t src, float* row) {
    for (int64_t k = 0; k < K; ++k) row[k] = float(load_as_double(A.data, A.dtype, size_t(src * K + k)));
  };
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
