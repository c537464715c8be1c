// Host conversions against CUDA's own host-side conversion functions:
// exhaustive for 8/16-bit decodes and bf16/fp16 -> fp8, random + edge cases
// for fp32 -> narrow.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tilecraft/dtype.h"

using namespace tilecraft;

namespace {
uint16_t bits(__nv_bfloat16 v) { return __nv_bfloat16_raw(v).x; }
uint16_t bits(__half v) { return __half_raw(v).x; }
__nv_bfloat16 bf16_of(uint16_t b) { __nv_bfloat16_raw r; r.x = b; return __nv_bfloat16(r); }
__half f16_of(uint16_t b) { __half_raw r; r.x = b; return __half(r); }
bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }
uint8_t cuda_e4m3(float v) { return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); }

std::vector<float> edge_floats() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, INFINITY, -INFINITY, NAN, -NAN,
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), 65504.f, 65519.99f, 65520.f, 65536.f, 448.f, 449.f,
                          464.f, 465.f, 480.f, -448.f, -464.f, 1e-8f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 0.001953125f,
                          0.0009765625f, 0.00146484375f};
  // Exact ties for every narrow format: halfway between neighbours.
  for (uint32_t b = 0x3f800000u; b < 0x3f800000u + 0x20000u * 8; b += 0x8000u) { float f; std::memcpy(&f, &b, 4); v.push_back(f); v.push_back(-f); }
  for (uint32_t m = 0; m < 8; ++m)
    for (int e = -12; e <= 9; ++e) v.push_back(std::ldexp(float(16 + 2 * m + 1), e - 4));  // e4m3 ties
  return v;
}
}  // namespace

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI32, DType::kI64})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_FALSE(parse_dtype("fp7").has_value());
}

TEST(DType, DecodeEvery16BitPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_TRUE(same_float(conv::bf16_to_f32(uint16_t(b)), __bfloat162float(bf16_of(uint16_t(b))))) << b;
    ASSERT_TRUE(same_float(conv::f16_to_f32(uint16_t(b)), __half2float(f16_of(uint16_t(b))))) << b;
  }
}

TEST(DType, DecodeEvery8BitPattern) {
  for (uint32_t b = 0; b < 256; ++b) {
    __half_raw h = __nv_cvt_fp8_to_halfraw(uint8_t(b), __NV_E4M3);
    ASSERT_TRUE(same_float(conv::e4m3_to_f32(uint8_t(b)), __half2float(__half(h)))) << b;
  }
}

TEST(DType, EveryBf16AndFp16ValueToFp8) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float fb = __bfloat162float(bf16_of(uint16_t(b)));
    ASSERT_EQ(conv::f32_to_e4m3(fb), __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{uint16_t(b)}, __NV_SATFINITE, __NV_E4M3))
        << "bf16 bits " << b << " value " << fb;
    float fh = __half2float(f16_of(uint16_t(b)));
    __half_raw hr;
    hr.x = uint16_t(b);
    ASSERT_EQ(conv::f32_to_e4m3(fh), __nv_cvt_halfraw_to_fp8(hr, __NV_SATFINITE, __NV_E4M3))
        << "fp16 bits " << b << " value " << fh;
  }
}

TEST(DType, Fp32ToNarrowEdgeCases) {
  for (float f : edge_floats()) {
    EXPECT_EQ(conv::f32_to_bf16(f), bits(__float2bfloat16_rn(f))) << f;
    EXPECT_EQ(conv::f32_to_f16(f), bits(__float2half_rn(f))) << f;
    EXPECT_EQ(conv::f32_to_e4m3(f), cuda_e4m3(f)) << f;
  }
}

TEST(DType, Fp32ToNarrowRandom) {
  std::mt19937_64 rng(12345);  // fixed seed, recorded here
  for (int i = 0; i < 4000000; ++i) {
    uint32_t b = uint32_t(rng());
    // Half the draws from random bit patterns (every exponent), half near 1.
    if (i & 1) b = (b & 0x807fffffu) | ((0x70u + (b >> 24) % 32u) << 23);
    float f;
    std::memcpy(&f, &b, 4);
    ASSERT_EQ(conv::f32_to_bf16(f), bits(__float2bfloat16_rn(f))) << f;
    ASSERT_EQ(conv::f32_to_f16(f), bits(__float2half_rn(f))) << f;
    ASSERT_EQ(conv::f32_to_e4m3(f), cuda_e4m3(f)) << f;
  }
}

// Whole rows convert exactly as element by element (the goldens read and
// write rows; the reports read elements): every float dtype, edge values and
// random bit patterns, at offsets that start mid-buffer.
TEST(DType, RowsConvertAsElementsDo) {
  std::vector<float> src = edge_floats();
  std::mt19937_64 rng(5201);  // fixed seed, recorded here
  for (int i = 0; i < 20000; ++i) {
    const uint32_t b = uint32_t(rng());
    float f;
    std::memcpy(&f, &b, 4);
    src.push_back(f);
  }
  const int64_t n = int64_t(src.size()), off = 3;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    std::vector<uint8_t> row((size_t(n) + off) * dtype_size(t), 0xa5), one(row.size(), 0xa5);
    store_row_f32(row.data(), t, off, n, src.data());
    for (int64_t i = 0; i < n; ++i) {
      const float v = src[size_t(i)];
      void* at = one.data() + (size_t(i) + off) * dtype_size(t);
      if (t == DType::kF32) std::memcpy(at, &v, 4);
      if (t == DType::kBF16) { const uint16_t h = conv::f32_to_bf16(v); std::memcpy(at, &h, 2); }
      if (t == DType::kF16) { const uint16_t h = conv::f32_to_f16(v); std::memcpy(at, &h, 2); }
      if (t == DType::kF8E4M3) *static_cast<uint8_t*>(at) = conv::f32_to_e4m3(v);
    }
    ASSERT_EQ(row, one) << dtype_name(t) << ": store_row_f32 differs from the element conversions";
    std::vector<float> back(static_cast<size_t>(n));
    load_row_f32(row.data(), t, off, n, back.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(same_float(back[size_t(i)], float(load_as_double(row.data(), t, size_t(i + off)))))
          << dtype_name(t) << " element " << i;
  }
}
