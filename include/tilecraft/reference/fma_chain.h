#pragma once
// Sums accumulated as the kernels accumulate: one fp32 fused multiply-add per
// term, in term order (a chain of std::fma). The goldens' hot loops, built
// with TC_FMA_CLONES; every chain keeps its order, so the bits are the same on
// every CPU.
#include <cstdint>

#include "tilecraft/host_fma.h"

namespace tilecraft::reference {

// y[n] = x[0] W[n, 0] + x[1] W[n, 1] + ... in k order, fp32 FMAs (W row-major
// [N, K]); the N chains run side by side.
void fma_dots(const float* x, const float* W, int64_t N, int64_t K, float* y);

// acc[i] = fma(x[i], s, acc[i]) for i in [0, n): one term of n chains.
void fma_axpy(const float* x, float s, float* acc, int64_t n);

}  // namespace tilecraft::reference
