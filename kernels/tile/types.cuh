#pragma once
// Element types and their conversions to and from fp32, with explicit rounding
// (round to nearest even; fp8 e4m3 saturates to +-448, NaN stays NaN). The
// host side (src/common/dtype.cpp) mirrors these bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace tc {

using bf16 = __nv_bfloat16;
using fp16 = __half;
struct fp8_e4m3 {
  unsigned char bits;
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(fp16 v) { return __half2float(v); }
__device__ __forceinline__ float to_float(fp8_e4m3 v) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(v.bits, __NV_E4M3);
  return __half2float(__half(h));
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ fp16 from_float<fp16>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ fp8_e4m3 from_float<fp8_e4m3>(float v) {
  return fp8_e4m3{static_cast<unsigned char>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3))};
}

}  // namespace tc
