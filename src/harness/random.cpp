// Compiled with -ffp-contract=off (see CMakeLists.txt): the one fused
// multiply-add of each value is the one written.
#include "tilecraft/harness/random.h"

#include <algorithm>
#include <cmath>

#include "harness/params.cuh"
#include "tilecraft/error.h"
#include "tilecraft/host_fma.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/parallel.h"

namespace tilecraft::harness {

uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then mixed
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return mix64(h);
}

TC_FMA_CLONES void uniform_values(uint64_t seed, uint64_t stream, uint64_t begin, int64_t n, float lo, float range,
                                  float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(range, random_unit(seed, stream, begin + uint64_t(i)), lo);
}

void fill_uniform(const TensorView& t, uint64_t seed, uint64_t stream, float lo, float hi) {
  if (!is_float(t.dtype) || t.is_cuda())
    throw Error(ErrorKind::kInvalidArgument, "fill_uniform: expected a float host tensor, got " + t.describe());
  const int64_t n = t.numel();
  const float range = hi - lo;
  auto work = [&](int64_t b, int64_t e) {
    constexpr int64_t kChunk = 4096;  // fp32 values, then one rounding pass into the tensor
    float v[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      const int64_t m = std::min(kChunk, e - i);
      uniform_values(seed, stream, uint64_t(i), m, lo, range, v);
      store_row_f32(t.data, t.dtype, size_t(i), m, v);
    }
  };
  parallel_for(n, 1, work);
}

void fill_uniform_device(const TensorView& t, uint64_t seed, uint64_t stream_id, float lo, float hi, CUstream stream) {
  if (!is_float(t.dtype) || !t.is_cuda())
    throw Error(ErrorKind::kInvalidArgument, "fill_uniform_device: expected a float CUDA tensor, got " + t.describe());
  if (t.numel() == 0) return;
  jit::KernelSpec spec{"harness/random.cuh", "tc::harness::fill_uniform_kernel", {dtype_kernel_type(t.dtype)},
                       std::string("fill ") + dtype_name(t.dtype)};
  const auto& k = jit::get_kernel(spec, t.device.index);
  tc::harness::FillParams p{t.data, (unsigned long long)t.numel(), seed, stream_id, lo, hi - lo};
  unsigned grid = unsigned(std::min<int64_t>((t.numel() + 255) / 256, 4096));
  jit::launch(k, grid, 1, 256, 0, stream, &p);
}

}  // namespace tilecraft::harness
