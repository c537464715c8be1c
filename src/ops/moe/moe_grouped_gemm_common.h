#pragma once
// What the grouped GEMM's config choice (moe_grouped_gemm_config.cpp) and its
// launch (moe_grouped_gemm.cpp) both read: layout sizes, alignment, shared
// memory and the bulk decode kernel's plan. Internal to the op (the layer
// also reads the weights' alignment and bases).
#include <cstdint>
#include <vector>

#include "tilecraft/ops/moe_grouped_gemm.h"

namespace tilecraft::ops::grouped_gemm {

inline constexpr const char* kOp = "moe_grouped_gemm";
inline constexpr int kBK = 64;          // tc::moe::kGemmBK
inline constexpr int kSmallTable = 64;  // pointer tables carried in the launch parameters
inline constexpr int kLargeTable = 512;
inline constexpr int kMaxSmem = 227 * 1024;  // sm_90 opt-in shared memory per block

// Layout rows M: out's rows, times the slots each output row sums (combine).
int64_t layout_rows(const MoeGroupedGemmArgs& a);
// Pointer-table entries for per-expert weights (0 when stacked).
int table_size(const MoeGroupedGemmArgs& a);
// Every expert matrix's base 16-byte aligned (stacked: the base and the
// stride between experts; per expert: each tensor).
bool weights_aligned16(const ExpertWeights& w);
// 16-byte loads: every row start 16-byte aligned.
bool vector_ok(const MoeGroupedGemmArgs& a);
// TMA weights: vector_ok (maps past 64 experts by pointer lie in global memory).
bool tma_ok(const MoeGroupedGemmArgs& a);
// Entries of the launch's table (pointers or TMA maps).
int launch_table(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c);
// TMA weights whose maps lie in global memory (more experts by pointer than
// the launch parameters hold maps for): a kernel writes them before the GEMM.
bool global_weight_maps(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c);
// Dynamic shared memory of the MMA kernels for config c.
int smem_bytes(const MoeGroupedGemmConfig& c, bool dual);
void check_weights(const ExpertWeights& w, const char* arg, DType dtype, int64_t N, int64_t K, const Device& on);
// Each expert's matrix base address.
std::vector<const void*> bases(const ExpertWeights& w);

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
inline constexpr int64_t kBulkSmemBytes =
    216 * 1024;                           // at most tc::moe::kBulkDynamicSmem (the kernel checks the static part fits)
inline constexpr int kBulkThreads = 544;  // tc::moe::kBulkThreads
inline constexpr int kBulkMaxRows = 64;   // tc::moe::kBulkMaxRows
struct BulkPlan {
  int cols = 0, stages = 0, abufs = 2;
  int64_t stage_bytes = 0, a_bytes = 0;
  bool fits = false;
  int64_t smem() const { return abufs * a_bytes + stages * stage_bytes; }
};
int64_t bulk_max_cols(const MoeGroupedGemmArgs& a);
BulkPlan bulk_plan(const MoeGroupedGemmArgs& a, int cols = 0);
bool bulk_by_default(const MoeGroupedGemmArgs& a, int sm_count);
// The tile height of a tile schedule (0 without one).
int64_t block_m_of(const MoeGroupedGemmArgs& a);
// Output tiles that can hold rows (a bound).
int64_t live_tiles_bound(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c);

}  // namespace tilecraft::ops::grouped_gemm
