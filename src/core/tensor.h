// Tensor: a contiguous row-major array of one dtype on one device, sharing a
// reference-counted Storage with its views. No strides: every view is
// contiguous (a reshape, or a range of rows of the leading dimension).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace rotor {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3, 4]"

class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::F16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::BF16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::I32;
  else {
    static_assert(std::is_same_v<T, uint8_t>, "unsupported tensor element type");
    return DType::U8;
  }
}

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  // Host values converted to `dtype` (a floating type) and placed on `device`.
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape,
                            DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor from_ints(const std::vector<int32_t>& values, const Shape& shape,
                          Device device = Device::cpu());
  static Tensor from_bytes(const std::vector<uint8_t>& values, const Shape& shape,
                           Device device = Device::cpu());
  // Every element set to `value` (floating dtypes, or integer dtypes with an integral value).
  static Tensor full(const Shape& shape, float value, DType dtype = DType::F32,
                     Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t i) const;  // negative i counts from the end
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }

  void* raw() const { return storage_ ? static_cast<char*>(storage_->data()) + offset_ : nullptr; }
  template <class T>
  T* data() const {
    ROTOR_CHECK(dtype_of<T>() == dtype_, "tensor of {} accessed as {}", dtype_name(dtype_),
                dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }

  // Same storage, new shape with the same element count; one -1 is inferred.
  Tensor view(const Shape& shape) const;
  // Rows [begin, begin + length) of the leading dimension (same storage).
  Tensor narrow(int64_t begin, int64_t length) const;
  // Row i of the leading dimension with that dimension removed.
  Tensor select(int64_t i) const;

  Tensor to(Device device) const;  // a copy on `device` (or *this when already there)
  Tensor clone() const;            // a deep copy on the same device
  // Copies `src` (same dtype and element count; any devices) into this tensor.
  void copy_from(const Tensor& src);
  void zero_();

  // Host copies of the values (floating dtypes -> float; i32/u8 -> int).
  std::vector<float> to_floats() const;
  std::vector<int32_t> to_ints() const;
  float item() const;  // the single element as float

  std::string str() const;  // "f32[2, 3] on cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
};

// Throws a rotor::Error naming `what` unless t has exactly `shape`.
void check_shape(const Tensor& t, const Shape& shape, const char* what);
void check_same_device(const Tensor& a, const Tensor& b, const char* what);

}  // namespace rotor
