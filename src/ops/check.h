#pragma once
// Argument checks every op shares: dtype, rank, contiguity, storage, device
// and element alignment, with messages naming op, argument, expected, given.
// Messages are built only on failure: these run on every call.
#include <initializer_list>

#include "tilecraft/runtime/driver.h"
#include "tilecraft/tensor.h"

namespace tilecraft::ops {

// The device every tensor of a call must be on: the backend's, and on the
// CUDA backend the GPU of the op's first tensor (a kernel launched there
// cannot read another GPU's memory).
Device tensors_device(DeviceType backend, const TensorView& first);

void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes, int rank,
                  const Device& on);
// The same, and the exact shape.
void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes,
                  const Shape& shape, const Device& on);
// Stacked expert matrices [E, rows, cols]: as check_tensor for a 3-D tensor,
// except that the experts may lie apart (first stride at least rows * cols,
// the matrices not overlapping); each matrix itself row-major.
void check_stacked_experts(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes,
                           const Device& on);

// An op's GPU call, held for its whole body: makes the tensors' GPU current
// (the caller's context comes back at the end, so a caller working on cuda:0
// stays there after an op on cuda:1 tensors) and checks that the stream is
// one of that GPU's (a launch on another GPU's stream fails inside the driver
// with no argument named).
class DeviceCall {
 public:
  DeviceCall(const Device& on, CUstream stream, const char* op);

 private:
  rt::ContextScope scope_;
};

}  // namespace tilecraft::ops
