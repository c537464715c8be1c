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

// Random kernel config overrides (random_configs.cpp): each shape gets
// `,config=k=N;k=N` of 1 to 3 of the op's config keys, values drawn from
// each key's range and beyond it (moe_grouped_gemm's draws of the
// warp-specialised kernel's keys also `,block_m=64|128` where the shape
// names no tile height), so that a case either passes its golden
// under the overrides or is refused naming the key: never a wrong result,
// a crash or an ignored key (`tilecraft test --op OP --random N
// --random-config`, GpuRandomConfigs.*). fused_moe, moe_grouped_gemm,
// moe_fused_mapping and moe_reduce_fused have keys; another op throws.
bool has_random_configs(const std::string& op);
std::vector<std::string> with_random_configs(const std::string& op, std::vector<std::string> shapes, uint64_t seed);
}  // namespace tilecraft::harness
