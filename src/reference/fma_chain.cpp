// Compiled with -ffp-contract=off (see CMakeLists.txt): only the std::fma
// calls written here are fused.
#include "tilecraft/reference/fma_chain.h"

#include <cmath>

namespace tilecraft::reference {

TC_FMA_CLONES void fma_dots(const float* x, const float* W, int64_t N, int64_t K, float* y) {
  // Eight rows at a time: eight independent chains per step of k (one chain
  // alone waits on each FMA's latency).
  constexpr int kRows = 8;
  int64_t n = 0;
  for (; n + kRows <= N; n += kRows) {
    float acc[kRows] = {};
    const float* w = W + n * K;
    for (int64_t k = 0; k < K; ++k) {
      const float xk = x[k];
      for (int j = 0; j < kRows; ++j) acc[j] = std::fma(xk, w[j * K + k], acc[j]);
    }
    for (int j = 0; j < kRows; ++j) y[n + j] = acc[j];
  }
  for (; n < N; ++n) {
    const float* w = W + n * K;
    float acc = 0.f;
    for (int64_t k = 0; k < K; ++k) acc = std::fma(x[k], w[k], acc);
    y[n] = acc;
  }
}

TC_FMA_CLONES void fma_axpy(const float* x, float s, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(x[i], s, acc[i]);
}

}  // namespace tilecraft::reference
