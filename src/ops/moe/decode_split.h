#pragma once
// fused_moe's decode path at T = 1 as one streaming kernel plus a combine
// (kernels/moe/decode_split.cuh; FusedMoeOptions::decode_split).
#include <cuda.h>

#include <string>
#include <vector>

#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"
#include "tilecraft/ops/fused_moe.h"

namespace tilecraft::ops {

// Why the one-kernel path cannot run these arguments on a GPU of compute
// capability cc_major ("" when it can).
std::string decode_split_blocker(const FusedMoeArgs& a, int64_t T, int64_t H, int64_t I, int cc_major);
// How the one-kernel path runs K slots at H and I on sm_count SMs (0:
// unknown, taken as 132): the slice width W (`cols` where > 0, else 128
// where it divides I, else the width whose (slot, slice) units fill the
// SMs' waves best), the down box height (`box_rows` where > 0, else stages
// of about 32 KB), the boxes per unit left to the balancing pool (`pool`
// where >= 0, else none), and what follows from them. A requested value that cannot run is an error
// naming decode_split_cols, decode_split_box_rows or decode_split_pool.
struct DecodeSplitPlan {
  int cols = 0, box_rows = 0, stages = 0, gu_cols = 0, slices = 0;
  int boxes = 0, pool_boxes = 0;  // down boxes per unit; the last pool_boxes of them in the pool
  bool balanced = false;          // decode_split = 2: the work split evenly over every SM
  int down_rows = 0;              // balanced: full down rows per phase-B item (a stage's worth)
  int64_t units = 0;
  int64_t grid = 0;            // CTAs: one per unit, at most one per SM (balanced: one per SM)
  double fill = 0;             // units / (waves x SMs)
  size_t workspace_bytes = 0;  // the fp32 partials (units x H), then each unit's h (units x W)
};
DecodeSplitPlan decode_split_plan(int64_t K, int64_t H, int64_t I, int sm_count, int cols, int box_rows,
                                  int pool = -1, bool balanced = false);
// Its two kernels (the streaming one at `cols` columns per slice, its
// balanced form where asked, the combine), for compile listings.
std::vector<jit::KernelSpec> decode_split_kernel_specs(DType act, DType out, int cols, bool balanced = false);
// Launches the streaming kernel (stream_part) and the combine (combine) on
// `stream`: ids and weights [1, K] (from the gate or the caller), partial:
// plan.workspace_bytes of device memory (a plan made for this device's
// SM count: its grid).
void decode_split(const FusedMoeArgs& a, const TensorView& ids, const TensorView& weights, void* partial,
                  const DecodeSplitPlan& plan, CUstream stream, const jit::CompileOptions& compile, bool stream_part,
                  bool combine);

}  // namespace tilecraft::ops
