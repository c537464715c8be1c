#include "tilecraft/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tilecraft {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    case DType::kF8E4M3: return "fp8_e4m3";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "?";
}

const char* dtype_kernel_type(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kBF16: return "tc::bf16";
    case DType::kF16: return "tc::fp16";
    case DType::kF8E4M3: return "tc::fp8_e4m3";
    case DType::kI32: return "int";
    case DType::kI64: return "long long";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "fp32" || n == "float32" || n == "float" || n == "f32") return DType::kF32;
  if (n == "bf16" || n == "bfloat16") return DType::kBF16;
  if (n == "fp16" || n == "float16" || n == "half" || n == "f16") return DType::kF16;
  if (n == "fp8_e4m3" || n == "e4m3" || n == "fp8" || n == "float8_e4m3fn") return DType::kF8E4M3;
  if (n == "int32" || n == "i32") return DType::kI32;
  if (n == "int64" || n == "i64") return DType::kI64;
  return std::nullopt;
}

bool is_float(DType t) { return t != DType::kI32 && t != DType::kI64; }

double subnormal_step(DType t) {
  switch (t) {
    case DType::kF16:
      return std::ldexp(1.0, -24);
    case DType::kBF16:
      return std::ldexp(1.0, -133);
    case DType::kF32:
      return std::ldexp(1.0, -149);
    case DType::kF8E4M3:
      return std::ldexp(1.0, -9);
    default:
      return 0;
  }
}

double half_ulp(DType t, double v) {
  int frac_bits = 0, emin = 0;  // stored significand bits, least normal exponent
  switch (t) {
    case DType::kF16: frac_bits = 10, emin = -14; break;
    case DType::kBF16: frac_bits = 7, emin = -126; break;
    case DType::kF32: frac_bits = 23, emin = -126; break;
    case DType::kF8E4M3: frac_bits = 3, emin = -6; break;
    default: return 0;
  }
  int e = emin + 1;               // (0: the subnormals' spacing)
  if (v != 0) std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, emin) - frac_bits - 1);
}

namespace conv {
namespace {
uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
float float_of(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}
}  // namespace

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    // Subnormal (or zero): value = man * 2^-24, exact in fp32.
    float mag = std::ldexp(float(man), -24);
    return sign ? -mag : mag;
  }
  return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t f32_to_f16(float v) {
  uint32_t x = bits_of(v);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;              // NaN, canonical as CUDA
  if (ax >= 0x477ff000u) return sign | 0x7c00u;      // >= 65520 rounds to inf
  if (ax < 0x38800000u) {
    // Result is subnormal or zero: quantum 2^-24. value/2^-24 rounded RNE.
    double q = std::nearbyint(std::ldexp(double(float_of(ax)), 24));
    return sign | uint16_t(q);  // q == 1024 becomes the smallest normal, by construction
  }
  uint32_t exp = (ax >> 23) - 112u;
  uint32_t man = ax & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1;  // carry may bump the exponent
  return sign | uint16_t(h);
}

float e4m3_to_f32(uint8_t b) {
  float sign = (b & 0x80u) ? -1.f : 1.f;
  uint32_t exp = (b >> 3) & 0xfu;
  uint32_t man = b & 0x7u;
  if (exp == 0xf && man == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(float(man), -9);
  return sign * std::ldexp(float(8 + man), int(exp) - 10);
}

uint8_t f32_to_e4m3(float v) {
  if (std::isnan(v)) return 0x7f;
  uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  double a = std::fabs(double(v));
  if (a >= 448.0) return sign | 0x7e;  // saturate (inf too)
  if (a < 0.015625) {                  // below 2^-6: subnormal, quantum 2^-9
    double q = std::nearbyint(std::ldexp(a, 9));
    return sign | uint8_t(q);          // q == 8 is the smallest normal, 0x08
  }
  int e;
  double m = std::frexp(a, &e);        // a = m * 2^e, m in [0.5, 1)
  // a = (1 + f) * 2^(e-1); mantissa f in 3 bits, rounded to nearest even.
  double f = std::nearbyint((m * 2.0 - 1.0) * 8.0);
  int exp = e - 1 + 7;
  if (f >= 8.0) { f = 0; exp += 1; }
  if (exp > 15 || (exp == 15 && f > 6)) return sign | 0x7e;
  return sign | uint8_t((exp << 3) | int(f));
}
}  // namespace conv

void load_row_f32(const void* data, DType t, size_t begin, int64_t n, float* out) {
  switch (t) {
    case DType::kF32: std::memcpy(out, static_cast<const float*>(data) + begin, size_t(n) * 4); break;
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + begin;
      for (int64_t i = 0; i < n; ++i) out[i] = conv::bf16_to_f32(p[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + begin;
      for (int64_t i = 0; i < n; ++i) out[i] = conv::f16_to_f32(p[i]);
      break;
    }
    case DType::kF8E4M3: {
      const uint8_t* p = static_cast<const uint8_t*>(data) + begin;
      for (int64_t i = 0; i < n; ++i) out[i] = conv::e4m3_to_f32(p[i]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = float(load_as_double(data, t, begin + size_t(i)));
      break;
  }
}

void store_row_f32(void* data, DType t, size_t begin, int64_t n, const float* v) {
  switch (t) {
    case DType::kF32: std::memcpy(static_cast<float*>(data) + begin, v, size_t(n) * 4); break;
    case DType::kBF16: {
      uint16_t* p = static_cast<uint16_t*>(data) + begin;
      for (int64_t i = 0; i < n; ++i) p[i] = conv::f32_to_bf16(v[i]);
      break;
    }
    case DType::kF16: {
      uint16_t* p = static_cast<uint16_t*>(data) + begin;
      for (int64_t i = 0; i < n; ++i) p[i] = conv::f32_to_f16(v[i]);
      break;
    }
    case DType::kF8E4M3: {
      uint8_t* p = static_cast<uint8_t*>(data) + begin;
      for (int64_t i = 0; i < n; ++i) p[i] = conv::f32_to_e4m3(v[i]);
      break;
    }
    default: break;  // integer dtypes hold no fp32 results
  }
}

}  // namespace tilecraft
