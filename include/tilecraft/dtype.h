#pragma once
// Element types and host conversions that round exactly as CUDA's device
// intrinsics do (round to nearest even; fp8 e4m3 saturating to +-448).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace tilecraft {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kI32, kI64 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

// Canonical names: fp32 bf16 fp16 fp8_e4m3 int32 int64.
const char* dtype_name(DType t);
// Accepts the canonical names and common aliases (float32, float16, e4m3, ...).
std::optional<DType> parse_dtype(std::string_view name);
bool is_float(DType t);
// The spacing of a float dtype's subnormals (its smallest positive value):
// below the normal range rounding errs by up to half of it, whatever the
// magnitude, so error bounds relative to a value need it as an absolute term.
double subnormal_step(DType t);
// Half the spacing of a float dtype's values around `v`: the most that
// rounding v to t (to nearest) errs by, down through the subnormal range
// (there, half of subnormal_step). 0 for integer dtypes.
double half_ulp(DType t, double v);

// The C++ type that spells each dtype inside kernels (tc::bf16 etc.).
const char* dtype_kernel_type(DType t);

namespace conv {
// bf16 both ways inline: goldens and generators convert every element.
inline float bf16_to_f32(uint16_t bits) {
  const uint32_t b = uint32_t(bits) << 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}
inline uint16_t f32_to_bf16(float v) {  // RNE, NaN stays NaN
  uint32_t x;
  std::memcpy(&x, &v, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // canonical NaN, as CUDA
  x += 0x7fffu + ((x >> 16) & 1u);                     // round to nearest even on the 16 dropped bits
  return uint16_t(x >> 16);
}
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float v);   // RNE, overflow -> inf
float e4m3_to_f32(uint8_t bits);
uint8_t f32_to_e4m3(float v);   // RNE, saturate to +-448, NaN -> 0x7f/0xff
}  // namespace conv

// Reads element i of a buffer of dtype t as a double (for goldens and reports).
inline double load_as_double(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kBF16: return conv::bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return conv::f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF8E4M3: return conv::e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
    case DType::kI32: return static_cast<const int32_t*>(data)[i];
    case DType::kI64: return double(static_cast<const int64_t*>(data)[i]);
  }
  return 0;
}
// Elements [begin, begin + n) of a float buffer of dtype t as fp32 (exact:
// every float dtype widens exactly), one dtype dispatch per row.
void load_row_f32(const void* data, DType t, size_t begin, int64_t n, float* out);
// fp32 values stored into elements [begin, begin + n) of a float buffer of
// dtype t, rounded to nearest even (fp8 saturating) as conv:: rounds.
void store_row_f32(void* data, DType t, size_t begin, int64_t n, const float* v);

}  // namespace tilecraft
