#include "ops/moe/tma_map.h"

#include <cuda.h>

#include <array>
#include <cstring>
#include <map>
#include <mutex>

#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {

void encode_tma_map(tc::moe::TmaDesc& d, const void* base, DType dtype, const int64_t (&dims)[3],
                    const int64_t (&strides)[2], const int (&box)[2], bool swizzle128) {
  static_assert(sizeof(tc::moe::TmaDesc) == sizeof(CUtensorMap), "TmaDesc mirrors CUtensorMap");
  // Weights are the same tensors call after call, and per-expert weights need
  // one map per expert and matrix per launch: reuse what was encoded (~1 us
  // each on the H200's host, measured).
  using Key = std::array<int64_t, 9>;
  static std::mutex mu;
  static std::map<Key, tc::moe::TmaDesc> cache;
  const Key key{int64_t(reinterpret_cast<uintptr_t>(base)), int64_t(dtype), dims[0], dims[1], dims[2],
                strides[0], strides[1], int64_t(box[0]) << 32 | int64_t(box[1]), int64_t(swizzle128)};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) {
      d = it->second;
      return;
    }
  }
  const cuuint64_t gdims[3] = {cuuint64_t(dims[0]), cuuint64_t(dims[1]), cuuint64_t(dims[2])};
  const cuuint64_t gstrides[2] = {cuuint64_t(strides[0]), cuuint64_t(strides[1])};
  const cuuint32_t gbox[3] = {cuuint32_t(box[0]), cuuint32_t(box[1]), 1}, elem[3] = {1, 1, 1};
  CUtensorMap m;
  TC_DRV(cuTensorMapEncodeTiled, &m,
         dtype == DType::kBF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : dtype == DType::kF32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
         3,
         const_cast<void*>(base), gdims, gstrides, gbox, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
         swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  std::memcpy(&d, &m, sizeof(m));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 4096) cache.clear();  // bounded: fresh weights on every call cannot grow it forever
  cache.emplace(key, d);
}

}  // namespace tilecraft::ops
