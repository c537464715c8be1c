#pragma once
// Case plumbing shared by the grouped-GEMM and layer adapters: the mapping
// golden of a routing, the rows a golden computes (all, or a sample covering
// every expert when the problem is model-sized), a comparison restricted to
// those rows with a relative-RMS bound, and a float64 check of them.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/reference/moe_grouped_gemm.h"

namespace tilecraft::harness {

// Relative RMS error allowed for fp16/bf16 outputs (shared ops/fused_moe.md).
inline constexpr double kMaxRelRms = 1e-2;

struct MappingLayout {
  HostTensor tokens_per_expert, expert_offsets, token_topk_to_pos, pos_to_token, tile_expert, num_tiles;
  std::vector<int32_t> counts;
  int64_t touched = 0;  // experts with at least one row
};

// Expert weights from one stacked device tensor [E, r, c]: as it is, or
// (per_expert) as E views of it passed one pointer per expert, which is how
// the race's per-expert tensors reach the kernels.
ops::ExpertWeights expert_weights_of(const TensorView& t, ops::WeightLayout layout, bool per_expert);

// moe_fused_mapping's golden over `ids` [T, K].
MappingLayout map_routing(const HostTensor& ids, int64_t E, int64_t block_m);

// Expert e of a generated stacked weight ([E, N, K], or [E, K, N] when kn) as fp32 [N, K].
void load_generated_expert(const GeneratedInput& g, uint64_t seed, int64_t e, int64_t N, int64_t K, bool kn,
                           float* nk);

// 1 for each layout row the golden computes: all used rows when the work is
// at most `full_macs` multiply-adds, else each expert's first and last used
// row plus evenly spaced used rows, about `sample` rows in all.
std::vector<uint8_t> golden_rows(const reference::MoeGroupedGemmRef& r, double full_macs, int64_t sample);

// Compares the masked rows (allclose or bitwise per `tol`), adds the relative
// RMS error (fails above kMaxRelRms) and the number of rows compared.
bool compare_rows(const Tolerance& tol, const std::vector<uint8_t>& mask, const TensorView& want,
                  const TensorView& got, nlohmann::json& r);

// float64 check of the masked rows of `out` (the reference's inputs).
F64Check check_rows_f64(const reference::MoeGroupedGemmRef& r, const std::vector<uint8_t>& mask,
                        const TensorView& out);

}  // namespace tilecraft::harness
