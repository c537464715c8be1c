#pragma once
// Arguments for the MoE tests: the layer's from its tensors, and shape-only
// device views for the CPU tests (the host's choices: configs, kernel specs,
// listings read shapes and alignment only, so these views point at an
// aligned address that is never dereferenced).
#include <cstdint>
#include <initializer_list>

#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/tensor.h"

namespace tilecraft::test {

// The layer's arguments with stacked weights ([E, N, K] per projection).
inline ops::FusedMoeArgs stacked_layer_args(TensorView x, TensorView w_router, TensorView w_gate, TensorView w_up,
                                            TensorView w_down, TensorView out) {
  ops::FusedMoeArgs a;
  a.x = x;
  a.w_router = w_router;
  a.w_gate.stacked = w_gate;
  a.w_up.stacked = w_up;
  a.w_down.stacked = w_down;
  a.out = out;
  return a;
}

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
  return stacked_layer_args(view({T, H}), view({E, H}), view({E, I, H}), view({E, I, H}), view({E, H, I}),
                            view({T, H}));
}

}  // namespace tilecraft::test
