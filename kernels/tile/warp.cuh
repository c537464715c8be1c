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

}  // namespace tc
