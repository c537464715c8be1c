#pragma once
// moe_grouped_gemm: rows grouped by expert, C[r] = epilogue(A[src(r)] . W_e),
// e = the expert owning row r's tile (moe_fused_mapping's tile schedule).
// Spec: shared ops/fused_moe.md, steps 3-5.
//
// - A rows are read through `a_index` (moe_fused_mapping's pos_to_token), so
//   the gather into expert-major order is fused into the load; -1 rows read 0.
// - Weights: one stacked tensor [E, N, K] (layout NK, nn.Linear) or [E, K, N]
//   (layout KN), or one tensor per expert [N, K] / [K, N] (the race's layout,
//   consumed by pointer: no transpose, no stack).
// - Epilogues: plain store; silu(A.Wg) * (A.Wu) when `w_up` is given (the fused
//   gate/up projection); optional per-row fp32 scale; output in the input
//   dtype or fp32.
// - Rows of tiles past num_tiles, or whose tile_expert is -1, are not written.
#include <cuda.h>

#include <optional>
#include <string>
#include <vector>

#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"
#include "tilecraft/tensor.h"

namespace tilecraft::ops {

enum class WeightLayout { kNK, kKN };  // per expert: [N, K] (nn.Linear) or [K, N]
const char* weight_layout_name(WeightLayout l);

struct ExpertWeights {
  // [E, N, K] or [E, K, N]. Each expert's matrix row-major; the experts may
  // lie apart (first stride >= N * K), so a view such as w13[:, :I] and
  // w13[:, I:] of a fused gate/up tensor [E, 2I, H] is taken as it is.
  std::optional<TensorView> stacked;
  std::vector<TensorView> per_expert; // E tensors [N, K] or [K, N] (used when `stacked` is empty)
  WeightLayout layout = WeightLayout::kNK;

  int64_t num_experts() const { return stacked ? stacked->shape[0] : int64_t(per_expert.size()); }
  // Elements from one expert's matrix to the next in `stacked` (0 without
  // it; the matrix size for one expert, whose first stride means nothing).
  int64_t expert_stride() const {
    if (!stacked) return 0;
    return stacked->shape[0] > 1 ? stacked->strides[0] : stacked->shape[1] * stacked->shape[2];
  }
};

struct MoeGroupedGemmArgs {
  TensorView a;                            // [a_rows, K] fp16 | bf16
  std::optional<TensorView> a_index;       // [M] int32, or absent: layout row r reads A row r
  std::optional<TensorView> tile_expert;   // [M / block_m] int32, or absent: one expert (index 0)
  std::optional<TensorView> num_tiles;     // [1] int32, or absent: all tiles
  ExpertWeights w;                         // the gate (or the only) projection
  std::optional<ExpertWeights> w_up;       // present: out = silu(A.w) * (A.w_up)
  std::optional<TensorView> row_scale;     // [M] fp32
  // [M] int32, or absent: rows with a negative entry are padding (read zeros
  // for A, like a_index = -1). For A in layout order; A by TMA (tma=2) is
  // then off, as it cannot skip rows. The layer passes pos_to_token to its
  // down projection where the decode kernel runs it.
  std::optional<TensorView> row_token;
  TensorView out;                          // [M, N] same dtype as a, or fp32
  // At most this many of the M rows hold data (0: unknown, up to M). A
  // tuning hint only (the split-K and decode-kernel choices count live tiles
  // from it); the layer passes T * top_k.
  int64_t rows_used = 0;
  // The decode kernel's per-row schedule (tile_expert has one entry per
  // layout row: block_m = 1), which the layer's decode path uses with the
  // routing ids as they are: no mapping.
  // - a_repeat > 1 (no a_index): layout row r reads A row r / a_repeat (a
  //   token's top_k rows from its one row of x).
  // - combine = S > 1 (plain projection, at most 32): out has M / S rows, and
  //   out[t] = sum over j < S, in order, of row_scale[t S + j] *
  //   round((A . W_e)[t S + j]): each product rounded to out's type (as a
  //   separate down projection stores it), the sum in fp32, rounded once
  //   (the down projection with the weighted combine fused in, with the
  //   mapped path's rounding); rows whose expert is outside [0, E) add
  //   nothing.
  int64_t a_repeat = 1;
  int64_t combine = 1;
  // tile_expert, a_index and row_scale were complete before the previous
  // kernel on the stream began (the layer's decode down projection: the gate
  // wrote them two launches earlier). The decode combine kernel then reads
  // its first item's slots while that kernel still runs (programmatic
  // dependent launch), and with MoeGroupedGemmConfig::prefetch = 1 also
  // prefetches its first weights into L2. Only set it when true: the early
  // reads do not wait for the previous kernel.
  bool schedule_settled = false;
  // [M] int32 or absent: negative entries mark padding rows, and every tile
  // holds its rows in use first (moe_fused_mapping's pos_to_token). The
  // warp-specialised kernel then skips the MMAs of a 64-row half of a
  // 128-row tile that starts on padding (MoeGroupedGemmConfig::half_skip);
  // the outputs are the same bits. The layer passes it to both projections.
  // With fill_stores (chosen where padding is common) padding rows are not
  // stored at all: their outputs are then unspecified.
  std::optional<TensorView> tile_fill;
  // The weighted combine fused in (the layer's down projection): out keeps
  // its rows, and into.out[t] = sum over k, in order, of weights[t, k] *
  // out[pos[t, k]] (positions outside [0, M) skipped; no routed slot gives
  // zeros), with moe_reduce_fused's bits. The warp-specialised kernel's idle
  // producer warps sum each token once its rows are stored, while later
  // tiles compute (GroupedGemmParams::comb_sync). Only where
  // moe_grouped_gemm_fuses_combine holds for the resolved config; every tile
  // of the schedule below num_tiles must name an expert in [0, E).
  struct CombineInto {
    TensorView pos;                     // [T, S] int32 (the mapping's token_topk_to_pos), S <= 32
    std::optional<TensorView> weights;  // [T, S] fp32, or absent: weight 1
    TensorView row_token;               // [M] int32 (the mapping's pos_to_token), < 0 = padding
    TensorView out;                     // [T, N], out's dtype (16-bit)
  };
  std::optional<CombineInto> combine_into;
};

// Tile configuration. 0 = choose. sm90: 1 = the Hopper wgmma kernel (128-row
// tiles, 16-byte aligned rows, compute capability 9.0), 2 = its
// warp-specialised form (a producer warpgroup feeds two consumer warpgroups),
// 0 = the mma.sync kernel, -1 = choose. tma (warp-specialised kernel only):
// 1 = weights by TMA tensor copies, 2 = A too (only without a_index: rows in
// layout order), 0 = everything by cp.async, -1 = TMA where it applies
// (wherever rows are 16-byte aligned; past 64 experts given per pointer the
// maps lie in global memory, written by a small kernel before each launch,
// in a slot per weight set and stream: chunks of 4 MB, up to 16 per GPU,
// allocated by the call that first needs one, so make one such call before
// capturing a CUDA graph).
struct MoeGroupedGemmConfig {
  int block_m = 0, block_n = 0, stages = 0, warps_m = 0, warps_n = 0;
  int sm90 = -1;
  int tma = -1;
  // Warp-specialised kernel: 1 = one CTA per SM loops over the tiles (the
  // producer loads the next tile while the consumers store this one) in a
  // static walk, 2 = the same with tiles handed out by a global counter, 0 =
  // one CTA per tile, -1 = choose (2). A launch parameter, like group_m.
  int persistent = -1;
  // mma.sync kernel: K split over this many CTAs per tile (fp32 partials in
  // scratch, summed in order by a second kernel), for decode shapes with too
  // few tiles to fill the GPU. 0 = choose (2-4 when the live tiles are
  // fewer than the SMs and each slice keeps >= 16 k-steps, else 1).
  int k_splits = 0;
  // CTA order (a launch parameter, not compiled in): 0 = row tile x column
  // tile grid; G > 0 = groups of G row tiles, row tile fastest (L2 reuse).
  int group_m = -1;
  // Grouped order of the warp-specialised kernel with TMA weights and a
  // tile schedule (group_m >= 2, tile_expert given):
  // N > 0 = a group boundary inside an expert moves back to the expert's
  // first row tile when it is at most N tiles back (N <= 3, N < group_m), so a
  // short expert's tiles share one group and its weights stream from DRAM
  // once; 0 = groups of exactly group_m row tiles; -1 = choose (3, or
  // group_m - 1, on the warp-specialised kernel with TMA weights and the
  // dynamic scheduler where one expert's weights take 16 MiB or more; else
  // 0; other kernels take 0 only). Same bits either way. A launch parameter.
  int group_align = -1;
  // Decode kernel (grouped_gemv.cuh): weights streamed into registers, no
  // tensor cores, for 16- or 32-row tile schedules holding a few real rows.
  // 1 = use it ([N, K] weights, 16-byte aligned rows), 0 = the MMA kernels,
  // -1 = choose (1 when rows_used is at most one row per expert and each
  // output column reads >= 4096 weight elements, K x matrices; never next to
  // an MMA-only override such as k_splits or block_n). With gemv=1, block_n
  // sets its columns per item: 32 (default) or 16 gated, 64 or 32 plain;
  // 16 or 8 with combine. Per-row schedules (block_m = 1) always
  // take it, and by default the width whose items spread most evenly over
  // the SMs.
  int gemv = -1;
  // Warp-specialised kernel with TMA weights: 1 = its tiles go out by TMA
  // tensor stores from the staged rows (the consumers move on to the next
  // tile while they drain), 0 = the consumers store the staged rows
  // themselves, -1 = choose (1 where the output rows start on 16 bytes).
  int tma_store = -1;
  // Warp-specialised kernel, 128-row tiles, with tile_fill given: 1 = a
  // consumer warpgroup whose 64-row half holds no rows skips its MMAs
  // (an expert's last tile with at most 64 rows runs on one warpgroup),
  // 0 = every half computes, -1 = choose (1 from 256 rows_used per expert).
  // A launch parameter.
  int half_skip = -1;
  // Warp-specialised kernel with TMA weights: 2 = CTA pairs (2-CTA
  // clusters) take adjacent tiles and run their k-steps in lockstep (a slot
  // is refilled once both CTAs released it), 1 = one CTA per tile,
  // -1 = choose (2, with half_skip, for the gated projection on 128-row
  // tiles where 256 experts or more average 0.75..1.25 tiles each; else 1; see
  // pairs_by_default in moe_grouped_gemm_config.cpp). Same bits either way.
  int cluster = -1;
  // CTA pairs only: 1 = where both tiles of a pair read the same weights
  // (same expert and columns) each weight box is loaded once from L2 and
  // multicast into both CTAs, 0 = each CTA loads its own, -1 = choose (0:
  // on the H200 the multicast made every measured layer slower than the
  // same pairs without it). A launch parameter.
  int multicast = -1;
  // Warp-specialised kernel, one CTA per tile: N > 0 = consumer warpgroup 1
  // starts N k-steps behind warpgroup 0, so each one's epilogue can run under
  // the other's MMAs (without the held-slot staging, which syncs both);
  // 0 = both in step (the default). A kernel parameter, for A/B runs.
  int stagger = 0;
  // Warp-specialised kernel with A gathered by cp.async: 1 = the producer
  // keeps each chunk's row address from the tile's start and adds k (a
  // K tail takes the checked path), about a third of the instructions per
  // chunk; 0 = each chunk's address derived per k-step. A kernel
  // parameter; -1 = choose (1 wherever it applies: fewer instructions at
  // the power cap; measured in moe_grouped_gemm_config).
  int lean_a = -1;
  // Warp-specialised kernel: 1 = the consumers make their MMA descriptors
  // of the ring's first stage once and each k-step's by adds; 0 = rebuilt
  // from the stage's address every k-step. A kernel parameter; -1 =
  // choose (1 on the warp-specialised kernel).
  int lean_desc = -1;
  // Warp-specialised kernel with tensor stores (tma_store=1), tile_fill
  // given and no fused combine: 1 = rows tile_fill marks as padding are not
  // stored (their outputs keep whatever was there; a 64-row block with
  // padding goes out by the consumers' own stores of its real rows), 0 =
  // every row of every tile is stored, -1 = choose (1 up to one row tile
  // per expert on average, where a third of the rows or more are padding).
  // A kernel parameter.
  int fill_stores = -1;
  // Decode combine kernel with schedule_settled: 1 = also hand each slot's
  // first weights to the L2 before the grid wait (within half the L2),
  // 0 = only read the first item's slots there, -1 = choose (0: on the H200
  // the prefetch cost DeepSeek-V3 T = 1's down projection 69 -> 75 us once
  // the slots were read early). A launch parameter, for A/B runs.
  int prefetch = -1;
  // Decode combine kernel with schedule_settled on sm_90: 1 = each CTA
  // bulk-copies its first item's weight rows (every slot's) into shared
  // memory before the grid wait, so its share streams while the previous
  // kernel drains (at most moe_grouped_gemm_max_preload_bytes: combine x
  // block_n x K x 2 bytes), 0 = no, -1 = choose (0: on the H200, Qwen3-30B
  // T = 1, it looked 1 us faster with the carveout below until the L2 flush
  // was made to evict every earlier line; then it was 0.7-1.3 us slower,
  // docs/perf/fused_moe.md sessions 30-31). A launch parameter.
  int preload = -1;
  // Decode kernels (gemv=1) on sm_90: 1 = their functions prefer the most
  // shared memory over L1 (the preferred carveout; their loads do not
  // allocate in L1), so a next kernel that takes much shared memory, such as
  // the combine kernel with preload, need not wait for an SM to drain and
  // reconfigure; 0 = the driver's choice, -1 = choose (1 for a kernel asked
  // to preload; fused_moe also sets it on the gate/up kernel before one). Part
  // of the kernel cache key (a function attribute).
  int carveout = -1;
  // Decode kernels on per-row schedules (block_m = 1, and the combine
  // kernel): 1 = where the items exceed the CTAs resident at once, that
  // many CTAs, each taking an even contiguous range of the flat output
  // columns (rows x N); 2 = so always (at most one CTA per half item);
  // 0 = one CTA per item of block_n columns, handed out by the hardware as
  // CTAs end; -1 = choose (1). Same bits either way. A launch parameter.
  int balance = -1;
  // Decode kernels on per-row schedules (the layer's decode path: gated at
  // block_m = 1, and the combine kernel), sm_90: 1 = weights streamed through
  // a ring of shared-memory stages by bulk copies (one CTA per SM, a producer
  // warp; grouped_gemv_bulk.cuh), 0 = register loads (grouped_gemv.cuh),
  // -1 = choose: 1 for the gated projection where it applies ([N, K] weights
  // whose piece of one output column fits a stage) and it streams at least
  // 896 KiB of weights per SM, else 0 (bulk_by_default in moe_grouped_gemm_common.cpp
  // has the measurements; the bulk down + combine was slower everywhere
  // measured: 86.3-86.6 against 64.1-64.6 us at DeepSeek-V3 T = 1). Same
  // contract and rounding; the fp32 sums run in another order.
  int bulk = -1;
  // The bulk kernel only: output columns per piece (one ring stage holds a
  // piece: columns x rows per column x K x 2 bytes), 0 = choose (stages of
  // about 32 KB, at least two gated columns where four stages still fit;
  // see bulk_plan in moe_grouped_gemm_common.h). More columns per
  // piece give the consumer warps more rows to dot at once; fewer give more
  // stages, and each stage two consumer warps. A launch parameter. In the
  // resolved config (moe_grouped_gemm_config): the width the bulk kernel
  // runs, or 0 without it.
  int bulk_cols = 0;
  std::string str() const;
};

// Whether moe_grouped_gemm runs these arguments with the decode kernel
// (gemv; the choice depends on neither the GPU nor its SM count).
bool moe_grouped_gemm_uses_gemv(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over);
// The most shared memory the decode combine kernel's preload takes (two CTAs
// per SM still fit).
constexpr int64_t moe_grouped_gemm_max_preload_bytes = 100 * 1024;
// Why the combine cannot be fused into a launch of `a` under the resolved
// config `c` ("" when it can): the warp-specialised kernel with A and C by
// TMA on the dynamic tile scheduler (persistent=2), one CTA per tile
// cluster, a plain projection with 16-bit output rows of a multiple of 8
// elements, a tile schedule, at most 32 slots per token.
std::string moe_grouped_gemm_combine_blocker(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c,
                                             int64_t slots);

// Sets the override named `key` (one of moe_grouped_gemm_config_keys()); an
// unknown key is an error naming `op` and `arg`.
void set_config_key(MoeGroupedGemmConfig& c, const std::string& key, int value, const char* op, const char* arg);
// The keys set_config_key takes, for error messages; whether `key` is one.
const char* moe_grouped_gemm_config_keys();
bool is_moe_grouped_gemm_config_key(const std::string& key);
// The keys of `c` that differ from the defaults, as "PREFIXkey=value, ..."
// ("" when none): for errors that name what a user set.
std::string moe_grouped_gemm_overrides(const MoeGroupedGemmConfig& c, const std::string& prefix = "");

struct MoeGroupedGemmOptions {
  MoeGroupedGemmConfig config;  // overrides (block_m must match the tile schedule when one is given)
  jit::CompileOptions compile;
};

// The tile height the heuristic picks for groups of about `rows_per_expert`
// rows; moe_fused_mapping pads each expert's rows to it. wgmma: the
// warp-specialised Hopper kernel serves these shapes (compute capability
// 9.0, rows on 16 bytes), which takes 64-row tiles for 9..64 rows per expert.
int moe_grouped_gemm_block_m(double rows_per_expert, bool wgmma = false);

// The complete configuration for these arguments on a GPU of compute
// capability `cc_major` with `sm_count` SMs (heuristic + overrides,
// validated; sm_count 0 = unknown: no split K unless asked for).
MoeGroupedGemmConfig moe_grouped_gemm_config(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& over,
                                             int cc_major = 9, int sm_count = 0);
// Whether the Hopper wgmma kernels can run these arguments on a GPU of
// compute capability `cc_major` (9, with 16-byte aligned rows and bases), so
// that a caller may ask for them (sm90 = 1 or 2) without an argument error.
bool moe_grouped_gemm_wgmma_ok(const MoeGroupedGemmArgs& a, int cc_major);
// SMs of `device` when a GPU is there, else 0 (kernel listings on any host).
int sm_count_if_gpu(int device);
// The device's compute capability (major), or 0 without a GPU.
int cc_major_if_gpu(int device);
// The compute capability kernel listings choose for: `asked` when > 0
// (compile --arch), else the device's, else 9 (no GPU: sm_90a).
int listing_cc_major(int asked, int device);
jit::KernelSpec moe_grouped_gemm_kernel_spec(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c);
// The second kernel of a split-K launch (c.k_splits > 1): sums the slices.
jit::KernelSpec moe_grouped_gemm_split_reduce_spec(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c);
// Every kernel one launch runs: the GEMM, and the split-K reduce after it or
// the kernel that writes the weight maps before it (TMA weights of more than
// 64 experts by pointer).
std::vector<jit::KernelSpec> moe_grouped_gemm_kernel_specs(const MoeGroupedGemmArgs& a, const MoeGroupedGemmConfig& c);

void validate_moe_grouped_gemm(const MoeGroupedGemmArgs& a, DeviceType backend);
void moe_grouped_gemm(const MoeGroupedGemmArgs& a, CUstream stream, const MoeGroupedGemmOptions& o = {});
void moe_grouped_gemm_cpu(const MoeGroupedGemmArgs& a);

}  // namespace tilecraft::ops
