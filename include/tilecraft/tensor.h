#pragma once
// TensorView: a non-owning description of memory (pointer, dtype, shape,
// strides in elements, device). Owning HostTensor / DeviceTensor hold storage.
// Shapes live in a fixed array so building a view never allocates (ops are on
// the hot path of a cached call).
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tilecraft/dtype.h"

namespace tilecraft {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const;
};

inline constexpr int kMaxDims = 6;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape from(const std::vector<int64_t>& d);
  int64_t operator[](int i) const { return dims[size_t(i)]; }
  int64_t& operator[](int i) { return dims[size_t(i)]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[512, 8]"
  std::vector<int64_t> vec() const { return {dims.begin(), dims.begin() + ndim}; }
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // in elements
  Device device;

  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* data, DType dtype, Shape shape, Device device);
  TensorView(void* data, DType dtype, Shape shape, Shape strides, Device device);

  int ndim() const { return shape.ndim; }
  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  bool defined() const { return data != nullptr || numel() == 0; }
  bool is_contiguous() const;
  bool is_cuda() const { return device.type == DeviceType::kCUDA; }
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
  std::string describe() const;  // "bf16[512, 7168] on cuda:0"
};

// Host tensor with owned, 64-byte aligned storage.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);
  TensorView view() const { return view_; }
  void* data() const { return view_.data; }
  template <typename T> T* ptr() const { return static_cast<T*>(view_.data); }
  DType dtype() const { return view_.dtype; }
  const Shape& shape() const { return view_.shape; }
  size_t nbytes() const { return view_.nbytes(); }
  int64_t numel() const { return view_.numel(); }
  void fill_bytes(uint8_t value);  // every byte; an empty tensor (no storage) is left as it is

 private:
  std::shared_ptr<std::byte> storage_;
  TensorView view_;
};

// Device tensor owning a driver allocation (freed on destruction).
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(DType dtype, Shape shape, int device = 0);
  static DeviceTensor from_host(const HostTensor& h, int device = 0);
  HostTensor to_host() const;
  void copy_from(const HostTensor& h);
  void fill_bytes(uint8_t value);  // complete on return (any stream sees it); used to poison outputs
  TensorView view() const { return view_; }
  void* data() const { return view_.data; }
  size_t nbytes() const { return view_.nbytes(); }

 private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

}  // namespace tilecraft
