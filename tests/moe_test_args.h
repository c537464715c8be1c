#pragma once
// Arguments for the MoE tests: the layer's from its tensors, and shape-only
// device views for the CPU tests (the host's choices: configs, kernel specs,
// listings read shapes and alignment only, so these views point at an
// aligned address that is never dereferenced).
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

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

// One fused gate/up tensor [E, 2I, H] on the host, each expert's gate rows
// then its up rows (as vLLM and SGLang keep w13), from gate and up [E, I, H].
inline HostTensor fuse_gate_up(const HostTensor& gate, const HostTensor& up) {
  const int64_t E = gate.shape()[0], I = gate.shape()[1], H = gate.shape()[2];
  HostTensor f(gate.dtype(), {E, 2 * I, H});
  const size_t m = size_t(I * H) * dtype_size(gate.dtype());
  for (int64_t e = 0; e < E; ++e) {
    std::memcpy(static_cast<char*>(f.data()) + size_t(2 * e) * m, static_cast<const char*>(gate.data()) + size_t(e) * m,
                m);
    std::memcpy(static_cast<char*>(f.data()) + size_t(2 * e + 1) * m,
                static_cast<const char*>(up.data()) + size_t(e) * m, m);
  }
  return f;
}

// Expert matrices [E, R, C] copied into the first R rows of [E, R + pad, C]
// (host), and the view of those rows: experts (R + pad) * C elements apart.
inline HostTensor pad_expert_rows(const HostTensor& w, int64_t pad) {
  const int64_t E = w.shape()[0], R = w.shape()[1], C = w.shape()[2];
  HostTensor big(w.dtype(), {E, R + pad, C});
  big.fill_bytes(0x7f);  // rows the view leaves out: large values, should any be read
  const size_t m = size_t(R * C) * dtype_size(w.dtype()), stride = size_t((R + pad) * C) * dtype_size(w.dtype());
  for (int64_t e = 0; e < E; ++e)
    std::memcpy(static_cast<char*>(big.data()) + size_t(e) * stride, static_cast<const char*>(w.data()) + size_t(e) * m,
                m);
  return big;
}
inline TensorView first_rows_view(const TensorView& big, int64_t rows) {
  return TensorView(big.data, big.dtype, Shape{big.shape[0], rows, big.shape[2]},
                    Shape{big.shape[1] * big.shape[2], big.shape[2], 1}, big.device);
}

}  // namespace tilecraft::test
