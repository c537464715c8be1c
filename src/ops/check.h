#pragma once
// Argument checks every op shares: dtype, rank, contiguity, storage, device
// and element alignment, with messages naming op, argument, expected, given.
// Messages are built only on failure: these run on every call.
#include <initializer_list>

#include "tilecraft/tensor.h"

namespace tilecraft::ops {

void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes, int rank,
                  DeviceType backend);
// The same, and the exact shape.
void check_tensor(const TensorView& t, const char* op, const char* arg, std::initializer_list<DType> dtypes,
                  const Shape& shape, DeviceType backend);

}  // namespace tilecraft::ops
