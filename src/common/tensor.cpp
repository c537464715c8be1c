#include "tilecraft/tensor.h"

#include <cstdlib>
#include <cstring>

#include "tilecraft/error.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft {

std::string Device::str() const {
  return type == DeviceType::kCPU ? std::string("cpu") : fmt::format("cuda:{}", index);
}

Shape::Shape(std::initializer_list<int64_t> d) {
  if (d.size() > size_t(kMaxDims)) throw Error(ErrorKind::kInvalidArgument, "Shape: too many dimensions");
  for (int64_t v : d) dims[size_t(ndim++)] = v;
}

Shape Shape::from(const std::vector<int64_t>& d) {
  if (d.size() > size_t(kMaxDims))
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("Shape: expected at most {} dimensions, got {}", kMaxDims, d.size()));
  Shape s;
  for (int64_t v : d) s.dims[size_t(s.ndim++)] = v;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[size_t(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[size_t(i)] != o.dims[size_t(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dims[size_t(i)]);
  return s + "]";
}

namespace {
Shape contiguous_strides(const Shape& shape) {
  Shape st;
  st.ndim = shape.ndim;
  int64_t s = 1;
  for (int i = shape.ndim - 1; i >= 0; --i) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}
}  // namespace

TensorView::TensorView(void* d, DType t, Shape s, Device dev)
    : data(d), dtype(t), shape(s), strides(contiguous_strides(s)), device(dev) {}

TensorView::TensorView(void* d, DType t, Shape s, Shape st, Device dev)
    : data(d), dtype(t), shape(s), strides(st), device(dev) {}

bool TensorView::is_contiguous() const {
  // No elements: nothing is laid out (numpy gives such arrays strides of 0).
  for (int i = 0; i < shape.ndim; ++i)
    if (shape[i] == 0) return true;
  int64_t expect = 1;
  for (int i = shape.ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

std::string TensorView::describe() const {
  return fmt::format("{}{} on {}", dtype_name(dtype), shape.str(), device.str());
}

HostTensor::HostTensor(DType dtype, Shape shape) {
  size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  size_t padded = (bytes + 63) / 64 * 64;
  void* p = padded ? std::aligned_alloc(64, padded) : nullptr;
  if (padded && !p) throw Error(ErrorKind::kInternal, fmt::format("HostTensor: out of memory for {} bytes", bytes));
  storage_ = std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
  view_ = TensorView(p, dtype, shape, Device{});
}

DeviceTensor::DeviceTensor(DType dtype, Shape shape, int device) {
  rt::ensure_context(device);
  size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  CUdeviceptr p = 0;
  if (bytes) TC_DRV(cuMemAlloc, &p, bytes);
  storage_ = std::shared_ptr<void>(reinterpret_cast<void*>(p), [](void* q) {
    if (q) rt::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(q));
  });
  view_ = TensorView(reinterpret_cast<void*>(p), dtype, shape, Device{DeviceType::kCUDA, device});
}

DeviceTensor DeviceTensor::from_host(const HostTensor& h, int device) {
  DeviceTensor d(h.dtype(), h.shape(), device);
  d.copy_from(h);
  return d;
}

void DeviceTensor::copy_from(const HostTensor& h) {
  if (h.nbytes() != nbytes())
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("DeviceTensor::copy_from: expected {} bytes, got {}", nbytes(), h.nbytes()));
  if (nbytes()) TC_DRV(cuMemcpyHtoD, reinterpret_cast<CUdeviceptr>(view_.data), h.data(), nbytes());
}

HostTensor DeviceTensor::to_host() const {
  HostTensor h(view_.dtype, view_.shape);
  if (nbytes()) TC_DRV(cuMemcpyDtoH, h.data(), reinterpret_cast<CUdeviceptr>(view_.data), nbytes());
  return h;
}

// memset of an empty tensor's null pointer is undefined even for 0 bytes.
void HostTensor::fill_bytes(uint8_t value) {
  if (nbytes()) std::memset(data(), value, nbytes());
}

void DeviceTensor::fill_bytes(uint8_t value) {
  if (!nbytes()) return;
  TC_DRV(cuMemsetD8, reinterpret_cast<CUdeviceptr>(view_.data), value, nbytes());
  // cuMemsetD8 may return before the memset is done, and it runs on the
  // legacy stream, which non-blocking streams do not wait for: without this
  // a large output's poison could land after the next call on such a stream
  // had written it (rare WRONG RESULTs on the race cases, whose routing
  // outputs are written ~0.1 ms into the call, after 0.2 GB of poison).
  TC_DRV(cuCtxSynchronize);
}

}  // namespace tilecraft
