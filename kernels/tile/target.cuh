#pragma once
// Target traits: what the tile layer may assume about the GPU it is compiled
// for. Kernels write Target::kWarpSize, never a literal 32, so a port to a
// wave-64 target changes this file, not the kernels.
namespace tc {

struct Target {
  static constexpr int kWarpSize = 32;
  static constexpr int kVectorBytes = 16;  // widest single global access
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static constexpr bool kHasTma = true;
  static constexpr bool kHasWgmma = true;
#else
  static constexpr bool kHasTma = false;
  static constexpr bool kHasWgmma = false;
#endif
};

}  // namespace tc
