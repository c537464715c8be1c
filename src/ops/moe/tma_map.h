#pragma once
// TMA tensor maps (CUtensorMap) for the Hopper kernels: rank-3 tensors of
// 16-bit elements (or fp32: the output of a row-scaled GEMM), 128-byte swizzle (the layout wgmma reads), zeros past the
// edges. Encoded maps are cached: a map is a pure function of its arguments.
#include <cstdint>

#include "moe/grouped_gemm_params.cuh"
#include "tilecraft/dtype.h"

namespace tilecraft::ops {

// dims: innermost first (elements); strides: bytes between consecutive
// indices of dims 1 and 2 (multiples of 16); box: elements of dims 0 and 1
// copied per request (dim 2 is always 1: an expert index).
// swizzle128: the 128-byte swizzle wgmma reads (box rows of at most 128
// bytes); false: rows as they are (up to 256 elements per box row).
void encode_tma_map(tc::moe::TmaDesc& d, const void* base, DType dtype, const int64_t (&dims)[3],
                    const int64_t (&strides)[2], const int (&box)[2], bool swizzle128 = true);

}  // namespace tilecraft::ops
