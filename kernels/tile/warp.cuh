#pragma once
// Warp-level reductions, written against Target::kWarpSize.
#include "tile/target.cuh"

namespace tc {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = Target::kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = Target::kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Arg-max over the warp of (value, index), ties to the smaller index; every
// lane gets the winner and its payload.
struct ArgMax {
  float value;
  int index;
  float payload;
};

__device__ __forceinline__ ArgMax warp_argmax(ArgMax a) {
#pragma unroll
  for (int o = Target::kWarpSize / 2; o > 0; o >>= 1) {
    ArgMax b{__shfl_xor_sync(0xffffffffu, a.value, o), __shfl_xor_sync(0xffffffffu, a.index, o),
             __shfl_xor_sync(0xffffffffu, a.payload, o)};
    if (b.value > a.value || (b.value == a.value && b.index < a.index)) a = b;
  }
  return a;
}

// Warp-wide max (kMax) or min of unsigned values, every lane gets the
// result: one redux instruction on sm_80+ (a dependent chain of one
// instruction, not five shuffle rounds), a shuffle butterfly before. The
// intrinsic, not volatile asm: the compiler may then overlap independent
// reductions.
template <bool kMax>
__device__ __forceinline__ unsigned warp_extreme_u32(unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return kMax ? __reduce_max_sync(0xffffffffu, v) : __reduce_min_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int o = Target::kWarpSize / 2; o > 0; o >>= 1) {
    const unsigned u = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? max(v, u) : min(v, u);
  }
  return v;
#endif
}

// The largest (kMax) or smallest of k[LO, LO + N) by a pairwise tree (depth
// log2 N, not a chain of N).
template <bool kMax, int LO, int N, int M>
__device__ __forceinline__ unsigned extreme_of(const unsigned (&k)[M]) {
  if constexpr (N == 1) {
    return k[LO];
  } else {
    const unsigned a = extreme_of<kMax, LO, N / 2>(k), b = extreme_of<kMax, LO + N / 2, N - N / 2>(k);
    return kMax ? max(a, b) : min(a, b);
  }
}

// An unsigned key that orders scores as float comparison does: a larger
// score has a larger key, -0 and +0 share one key, and NaN takes key 1,
// below every number (a NaN never beat a number in the comparisons these
// keys replace); key 0 is free for "not a candidate".
__device__ __forceinline__ unsigned score_key(float v) {
  if (v != v) return 1u;
  const unsigned b = __float_as_uint(v == 0.f ? 0.f : v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

}  // namespace tc
