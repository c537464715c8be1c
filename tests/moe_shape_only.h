#pragma once
// Shape-only device views for the MoE CPU tests: the host's choices (configs,
// kernel specs, listings) read shapes and alignment only, so these views
// point at an aligned address that is never dereferenced.
#include <cstdint>
#include <initializer_list>

#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/tensor.h"

namespace tilecraft::test {

// A device view at an aligned address that is never dereferenced: for the
// host's choices (configs, kernel specs, listings), which read shapes and
// alignment only.
inline TensorView shape_only(DType t, Shape shape) {
  return TensorView(reinterpret_cast<void*>(uintptr_t(1) << 20), t, shape, Device{DeviceType::kCUDA, 0});
}

// A bf16 layer of T tokens, E experts, hidden size H and intermediate I,
// stacked [N, K] weights, as shape-only views.
inline ops::FusedMoeArgs shape_only_layer(int64_t T, int64_t E, int64_t H, int64_t I) {
  auto view = [](std::initializer_list<int64_t> shape) { return shape_only(DType::kBF16, Shape(shape)); };
  ops::FusedMoeArgs a;
  a.x = view({T, H});
  a.out = view({T, H});
  a.w_router = view({E, H});
  a.w_gate.stacked = view({E, I, H});
  a.w_up.stacked = view({E, I, H});
  a.w_down.stacked = view({E, H, I});
  return a;
}

}  // namespace tilecraft::test
