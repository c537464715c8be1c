#pragma once
// Parameters of build_tma_maps_kernel (tma_maps.cuh), shared verbatim by the
// kernel and the host (plain C++).
#include "moe/grouped_gemm_params.cuh"

namespace tc::moe {

// Most experts by pointer a grouped GEMM takes (kLargeTable on the host).
constexpr int kMaxMapExperts = 512;
constexpr int kTmaMapsThreads = 128;  // per block, one map each

struct TmaMapsBuild {
  TmaDesc tmpl[2];                     // expert 0's map of each matrix
  TmaDesc* dst;                        // [mats][experts], 128-byte aligned
  int experts, mats;                   // experts per matrix; 1 or 2 matrices
  const void* ptr[2][kMaxMapExperts];  // each expert's base, per matrix
};

}  // namespace tc::moe
