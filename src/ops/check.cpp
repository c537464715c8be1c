#include "ops/check.h"

#include "tilecraft/error.h"

namespace tilecraft::ops {

namespace {
// Every check of check_tensor; `experts_apart`: a 3-D tensor whose first
// stride may exceed the matrix size (check_stacked_experts).
void check_layout(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes, int rank,
                  const Device& on, bool experts_apart) {
  bool ok = false;
  for (DType d : dtypes) ok |= d == t.dtype;
  if (!ok) {
    std::string allowed;
    for (DType d : dtypes) allowed += (allowed.empty() ? "" : " or ") + std::string(dtype_name(d));
    throw_arg_error(ErrorKind::kType, op, arg, "dtype " + allowed, t.describe());
  }
  TC_CHECK_ARG(t.ndim() == rank, op, arg, fmt::format("a {}-D tensor", rank), t.describe());
  if (experts_apart) {
    const TensorView one(t.data, t.dtype, Shape{t.shape[1], t.shape[2]}, Shape{t.strides[1], t.strides[2]}, t.device);
    TC_CHECK_ARG(one.is_contiguous() && (t.shape[0] <= 1 || t.strides[0] >= t.shape[1] * t.shape[2]), op, arg,
                 "row-major expert matrices, one after another or apart (first stride >= rows * cols)",
                 t.describe() + " with strides " + t.strides.str());
  } else {
    TC_CHECK_ARG(t.is_contiguous(), op, arg, "a contiguous (row-major) tensor",
                 t.describe() + " with strides " + t.strides.str());
  }
  TC_CHECK_ARG(t.data != nullptr || t.numel() == 0, op, arg, "a tensor with storage", "a null data pointer");
  TC_CHECK_ARG(t.device.type == on.type, op, arg, on.type == DeviceType::kCUDA ? "a CUDA tensor" : "a CPU tensor",
               t.describe());
  TC_CHECK_ARG(on.type != DeviceType::kCUDA || t.device.index == on.index, op, arg,
               fmt::format("a tensor on {} (the GPU of the op's first tensor)", on.str()), t.describe());
  TC_CHECK_ARG(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0, op, arg,
               fmt::format("data aligned to its element size ({} bytes)", dtype_size(t.dtype)),
               fmt::format("address {}", t.data));
}
}  // namespace

Device tensors_device(DeviceType backend, const TensorView& first) {
  return Device{backend, backend == DeviceType::kCUDA ? first.device.index : 0};
}

void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes, int rank,
                  const Device& on) {
  check_layout(t, op, arg, dtypes, rank, on, false);
}

void check_stacked_experts(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes,
                           const Device& on) {
  check_layout(t, op, arg, dtypes, 3, on, true);
}

void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes,
                  const Shape& shape, const Device& on) {
  check_tensor(t, op, arg, dtypes, shape.ndim, on);
  TC_CHECK_ARG(t.shape == shape, op, arg, "shape " + shape.str(), t.describe());
}

namespace {
// A tensor's GPU must exist here (a view built by hand may name any ordinal).
int existing_gpu(const Device& on, const char* op) {
  const int count = rt::device_count();
  TC_CHECK_ARG(on.index >= 0 && on.index < count, op, "tensors",
               fmt::format("tensors on a GPU of this machine (cuda:0 to cuda:{})", count - 1),
               fmt::format("tensors on {}", on.str()));
  return on.index;
}
}  // namespace

DeviceCall::DeviceCall(const Device& on, CUstream stream, const char* op) : scope_(existing_gpu(on, op)) {
  // The null stream (0) and the per-thread one are the current context's:
  // after the scope, the tensors' GPU's.
  CUcontext ctx = nullptr;
  const CUresult r = rt::driver().cuStreamGetCtx(stream, &ctx);
  TC_CHECK_ARG(r == CUDA_SUCCESS, op, "stream", "a live CUDA stream",
               fmt::format("a handle the driver refuses (CUresult {})", int(r)));
  TC_CHECK_ARG(ctx == scope_.context(), op, "stream",
               fmt::format("a stream of {} (the tensors' GPU)", on.str()),
               "a stream of another GPU (or of a context that is not the GPU's primary one)");
}

}  // namespace tilecraft::ops
