#include "ops/moe/moe_grouped_gemm_common.h"

#include <fmt/format.h>

#include <algorithm>

#include "moe/grouped_gemm_params.cuh"
#include "ops/check.h"
#include "tilecraft/error.h"

namespace tilecraft::ops::grouped_gemm {

// Layout rows M: out's rows, times the slots each output row sums (combine).
int64_t layout_rows(const MoeGroupedGemmArgs& a) { return a.out.shape[0] * std::max<int64_t>(a.combine, 1); }

int table_size(const MoeGroupedGemmArgs& a) {
  if (a.w.stacked) return 0;
  return a.w.num_experts() <= kSmallTable ? kSmallTable : kLargeTable;
}

namespace {
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

bool weights_aligned16(const ExpertWeights& w) {
  if (w.stacked)
    return aligned16(w.stacked->data) && w.expert_stride() * int64_t(dtype_size(w.stacked->dtype)) % 16 == 0;
  for (auto& t : w.per_expert)
    if (!aligned16(t.data)) return false;
  return true;
}

// 16-byte loads need every row start 16-byte aligned: K (and N for the KN
// layout) multiples of 8 elements and 16-byte aligned bases.
bool vector_ok(const MoeGroupedGemmArgs& a) {
  const int64_t K = a.a.shape[1], N = a.out.shape[1];
  // [K, N] weights load along N; output pairs need even rows.
  if (K % 8 || !aligned16(a.a.data) || !aligned16(a.out.data) || N % (a.w.layout == WeightLayout::kKN ? 8 : 2))
    return false;
  return weights_aligned16(a.w) && (!a.w_up || weights_aligned16(*a.w_up));
}

// TMA weights: strides are multiples of 16 bytes whenever vector_ok holds.
// The maps travel in the launch parameters (one per expert matrix when given
// per pointer: 64 experts x 2 matrices x 128 bytes = 16 KB), or past 64
// experts by pointer in global memory (tma_map_table.h).
bool tma_ok(const MoeGroupedGemmArgs& a) { return vector_ok(a); }

// Entries of the launch's table: pointers (table_size), or for TMA weights
// maps sized to the experts (8, 16, 32 or 64: 128 bytes per map and matrix,
// so the race's 8 experts launch with 2 KB of maps, not 16 KB), or past 64
// experts kLargeTable (the maps in global memory).
int launch_table(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  if (c.tma < 1 || a.w.stacked) return table_size(a);
  if (a.w.num_experts() > tc::moe::kParamMaps) return kLargeTable;
  int n = 8;
  while (n < a.w.num_experts()) n *= 2;
  return n;
}

bool global_weight_maps(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  return c.tma >= 1 && launch_table(a, c) > tc::moe::kParamMaps;
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

void check_weights(const ExpertWeights& w, const char* arg, DType dtype, int64_t N, int64_t K, const Device& on) {
  const bool kn = w.layout == WeightLayout::kKN;
  const Shape one = kn ? Shape{K, N} : Shape{N, K};
  const std::string want_one = kn ? fmt::format("[K, N] = [{}, {}]", K, N) : fmt::format("[N, K] = [{}, {}]", N, K);
  if (w.stacked) {
    check_stacked_experts(*w.stacked, kOp, arg, {dtype}, on);
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
    check_tensor(w.per_expert[e], kOp, name.c_str(), {dtype}, 2, on);
    TC_CHECK_ARG(w.per_expert[e].shape == one, kOp, name,
                 fmt::format("{} ({} layout)", want_one, weight_layout_name(w.layout)), w.per_expert[e].describe());
  }
}

std::vector<const void*> bases(const ExpertWeights& w) {
  std::vector<const void*> out;
  const int64_t E = w.num_experts();
  for (int64_t e = 0; e < E; ++e) {
    if (w.stacked)
      out.push_back(static_cast<const char*>(w.stacked->data) +
                    e * w.expert_stride() * int64_t(dtype_size(w.stacked->dtype)));
    else
      out.push_back(w.per_expert[size_t(e)].data);
  }
  return out;
}

// The widest piece the kernel takes: kBulkMaxRows weight rows, N columns.
int64_t bulk_max_cols(const MoeGroupedGemmArgs& a) {
  const int64_t U = a.w_up ? 2 : a.combine;
  return std::max<int64_t>(1, std::min<int64_t>(a.out.shape[1], kBulkMaxRows / std::max<int64_t>(U, 1)));
}
BulkPlan bulk_plan(const MoeGroupedGemmArgs& a, int cols) {
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

// Output tiles that can hold rows: each expert's rows are padded to the
// tile, so sum of ceil(r_e / block_m) <= used / block_m + (experts holding
// rows), with used = rows_used (else M).
int64_t live_tiles_bound(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c) {
  const int64_t M = layout_rows(a), N = a.out.shape[1], E = a.w.num_experts();
  const int64_t used = a.rows_used > 0 ? std::min(a.rows_used, M) : M;
  const int64_t row_tiles = std::min<int64_t>((M + c.block_m - 1) / c.block_m, used / c.block_m + std::min(E, used));
  return std::max<int64_t>(row_tiles, 1) * ((N + c.block_n - 1) / c.block_n);
}

}  // namespace tilecraft::ops::grouped_gemm
