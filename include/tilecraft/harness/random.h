#pragma once
// Counter-based random numbers: value i of stream s under seed is a pure
// function of (seed, s, i), so inputs are reproducible from the recorded seed,
// can be generated in parallel, and the device generator matches the host's.
#include <cstdint>
#include <string_view>

#include "tilecraft/tensor.h"

namespace tilecraft::harness {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t random_bits(uint64_t seed, uint64_t stream, uint64_t i) {
  return mix64(mix64(seed ^ mix64(stream)) + i);
}
// Uniform in [0, 1) with 24 random bits: exact in fp32.
inline float random_unit(uint64_t seed, uint64_t stream, uint64_t i) {
  return float(random_bits(seed, stream, i) >> 40) * (1.0f / 16777216.0f);
}
uint64_t hash_string(std::string_view s);  // stable across runs and machines

// out[i] = lo + range * u for values begin .. begin + n - 1 of the stream, in
// fp32 with one fused multiply-add (as the device generator computes them).
void uniform_values(uint64_t seed, uint64_t stream, uint64_t begin, int64_t n, float lo, float range, float* out);

// Fills a host tensor (any float dtype) with lo + (hi - lo) * u, rounded to its dtype.
void fill_uniform(const TensorView& t, uint64_t seed, uint64_t stream, float lo, float hi);
// The same values, generated on the device by a JIT kernel on `stream`.
void fill_uniform_device(const TensorView& t, uint64_t seed, uint64_t stream_id, float lo, float hi, struct CUstream_st* stream);

}  // namespace tilecraft::harness
