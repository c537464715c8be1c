#pragma once
// moe_reduce_fused: weighted gather-sum of expert outputs back to token order.
// Spec: shared ops/moe_reduce_fused.md. Bitwise identical on CPU and CUDA.
#include <cuda.h>

#include <optional>

#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"
#include "tilecraft/tensor.h"

namespace tilecraft::ops {

struct MoeReduceFusedArgs {
  TensorView x;                              // [E, H] fp32 | bf16 | fp16
  TensorView token_topk_to_pos;              // [T, K] int32; -1 = skip
  std::optional<TensorView> topk_weights;    // [T, K] fp32
  std::optional<TensorView> x_sf;            // [E] fp32
  std::optional<TensorView> sf;              // [1] fp32, only with fp8 output
  TensorView out;                            // [T, H] dtype of x, or fp8_e4m3
};

struct MoeReduceFusedOptions {
  // Checked mode: positions >= E raise Error(kIndex) naming token, slot and
  // value (costs a stream sync on CUDA). Unchecked: they are skipped, never read.
  bool checked = false;
  // Kernel config overrides (0 = heuristic). vec: elements per thread access;
  // items: chunks per thread; block: threads per block.
  // hints: bit 0 streaming stores, bit 1 L2 256B load hint (-1 = default);
  // ctas_per_sm: cap the token walk to this many blocks per SM (0 = a block
  // row per token).
  int vec = 0, items = 0, block = 0, hints = -1, ctas_per_sm = 0;
  jit::CompileOptions compile;
};

// The kernel configuration a call resolves to (for inspect / compile tables).
struct MoeReduceFusedConfig {
  DType in, out;
  int k, vec, items, block, hints, ctas_per_sm;
  bool weights, x_sf, sf, checked;
  std::string str() const;
  uint64_t code() const;  // unique per config: the key of the op's kernel cache
  jit::KernelSpec kernel_spec() const;
};

// Shape/dtype/device checks shared by both backends; throws with op, argument,
// expected and given.
void validate_moe_reduce_fused(const MoeReduceFusedArgs& a, DeviceType backend);

// Picks the kernel config for these arguments (pointers decide vector width).
MoeReduceFusedConfig moe_reduce_fused_config(const MoeReduceFusedArgs& a, const MoeReduceFusedOptions& o);

// CUDA backend: enqueues on `stream`; no host sync unless checked.
void moe_reduce_fused(const MoeReduceFusedArgs& a, CUstream stream, const MoeReduceFusedOptions& o = {});
// CPU backend: multi-threaded over tokens, same arithmetic as the golden.
void moe_reduce_fused_cpu(const MoeReduceFusedArgs& a, bool checked = false);

}  // namespace tilecraft::ops
