#pragma once
// Kernel parameters of the one-kernel decode path (decode_split.cuh), shared
// verbatim by kernel and host.
#include "moe/grouped_gemm_params.cuh"

namespace tc::moe {

constexpr int kSplitMaxCols = 128;        // W: columns of I per unit (one down slice), a multiple of 8
constexpr int kSplitMaxBoxRows = 256;     // R: rows of H per down box (R x 256 bytes = one stage; the
                                          // tensor copy's limit), a multiple of 8
constexpr int kSplitMaxStages = 8;
constexpr int kSplitMaxSlots = 32;        // K: slots of the token (fused_moe's top_k limit)
constexpr int kSplitThreads = 16 * 32 + 32;  // two consumer warps per stage (those past the stages idle) + the producer
constexpr int kBalancedMaxCols = 512;     // decode_split = 2: phase-A columns of h per CTA (the host checks)
constexpr int kCombineCols = 32;          // the combine kernel: columns per CTA (a warp's row of loads)
constexpr int kCombineThreads = 256;      // 8 warps: slots j, j + 8, ... each

struct DecodeSplitParams {
  const void* x;      // [H]: the token (T = 1)
  const int* ids;     // [S]: its slots' experts; outside [0, E): the slot adds nothing
  const float* scale; // [S]: routing weights
  const void* w_gate; // [E, I, H] stacked, rows contiguous along H
  const void* w_up;   // [E, I, H]
  float* partial;     // [S * slices, H]: unit u = slot * slices + slice, fp32 sums over the slice's columns
  void* out;          // [H] (combine kernel)
  int H, I, S, E;
  int slices;         // I / W
  int stages;         // ring stages of box_rows * W elements
  int box_rows;       // R: rows of H per down box
  int gu_cols;        // gate/up columns per piece (2 gu_cols rows of H fit a stage)
  // Balancing (pool_boxes > 0): the last pool_boxes down boxes of every
  // unit go to a pool that any CTA may take from once every unit's h is in
  // h_global. sched: a launch counter pair (ops/moe/launch_counters.h),
  // left at 0: [0] counts pool claims (low 16 bits) and units whose h is
  // published (high bits), [1] the CTAs done. decode_split = 2: sched[1]
  // the CTAs done, then one published-column count per live slot.
  int pool_boxes;
  float* h_global;    // [S * slices, W]: each unit's h slice (pool_boxes > 0; decode_split = 2: as T)
  const void* w_down; // [E, H, I] stacked (decode_split = 2 reads full rows by bulk copies)
  int down_rows;      // decode_split = 2: full down rows per phase-B item (n I elements fit a stage)
  unsigned* sched;
  // Elements from one expert's matrix to the next: gate and up (I * H when
  // contiguous; 2 * I * H for the views of a fused w13 [E, 2I, H]) and down
  // (H * I when contiguous). Rows within a matrix stay contiguous.
  long long gu_stride, down_stride;
};

// The fused kernel's launch: the down weights' tensor map lives in the
// parameter space (__grid_constant__), where the TMA unit reads it. Map:
// the stacked [E, H, I] down weights, dims (I, H, E), boxes of W columns x
// box_rows rows, no swizzle.
struct DecodeSplitLaunch {
  DecodeSplitParams p;
  TmaDesc down;
};

}  // namespace tc::moe
