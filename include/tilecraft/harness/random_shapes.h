#pragma once
// Seeded random workloads (`--shape` strings) of every MoE op: shapes,
// dtypes, weight layouts, routings and gate modes that no manifest entry
// names, so the heuristics and kernels are checked off the measured points
// too (`tilecraft test --op OP --random N`, the GpuRandomShapes tests). Each
// string reproduces its case alone:
//   tilecraft test --op fused_moe --shape '<string>'
#include <cstdint>
#include <string>
#include <vector>

namespace tilecraft::harness {
// Upper bounds on a draw's size: weight elements (the golden regenerates
// the touched experts' weights on the host) and multiply-adds. Draws over
// them are redrawn. The defaults suit the GPU tests; the CPU backend's CI
// test takes smaller ones.
struct ShapeBudget {
  int64_t weights = 0, macs = 0;  // 0: the generator's default
};
// `count` valid fused_moe workloads (T from 0 to a few thousand, E 1..384,
// K 1..16, odd H and I, both gate modes, every routing, both weight forms).
std::vector<std::string> random_layer_shapes(uint64_t seed, int count, ShapeBudget budget = {});
// `count` valid moe_grouped_gemm workloads (every layout, weight form, A-row
// form, padding mode and tile height the manifest accepts).
std::vector<std::string> random_gemm_shapes(uint64_t seed, int count, ShapeBudget budget = {});
// `count` valid workloads of the routing and combine operators: the top-k
// gate (E 1..1024, K 1..32, both modes, tied logits, rounded scores), the
// mapping (block_m 1..1024) and moe_reduce_fused (every routing form).
std::vector<std::string> random_gate_shapes(uint64_t seed, int count);
std::vector<std::string> random_mapping_shapes(uint64_t seed, int count);
std::vector<std::string> random_reduce_shapes(uint64_t seed, int count);
// `count` draws for `op` (one of the above); throws naming the ops that have
// a generator when `op` has none.
std::vector<std::string> random_shapes(const std::string& op, uint64_t seed, int count);
}  // namespace tilecraft::harness
