#include "ops/check.h"

#include "tilecraft/error.h"

namespace tilecraft::ops {

void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes, int rank,
                  DeviceType backend) {
  bool ok = false;
  for (DType d : dtypes) ok |= d == t.dtype;
  if (!ok) {
    std::string allowed;
    for (DType d : dtypes) allowed += (allowed.empty() ? "" : " or ") + std::string(dtype_name(d));
    throw_arg_error(ErrorKind::kType, op, arg, "dtype " + allowed, t.describe());
  }
  TC_CHECK_ARG(t.ndim() == rank, op, arg, fmt::format("a {}-D tensor", rank), t.describe());
  TC_CHECK_ARG(t.is_contiguous(), op, arg, "a contiguous (row-major) tensor",
               t.describe() + " with strides " + t.strides.str());
  TC_CHECK_ARG(t.data != nullptr || t.numel() == 0, op, arg, "a tensor with storage", "a null data pointer");
  TC_CHECK_ARG(t.device.type == backend, op, arg, backend == DeviceType::kCUDA ? "a CUDA tensor" : "a CPU tensor",
               t.describe());
  TC_CHECK_ARG(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0, op, arg,
               fmt::format("data aligned to its element size ({} bytes)", dtype_size(t.dtype)),
               fmt::format("address {}", t.data));
}

void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes,
                  const Shape& shape, DeviceType backend) {
  check_tensor(t, op, arg, dtypes, shape.ndim, backend);
  TC_CHECK_ARG(t.shape == shape, op, arg, "shape " + shape.str(), t.describe());
}

}  // namespace tilecraft::ops
