#include "core/tensor.h"

#include <cstring>

#include "core/allocator.h"
#include "core/cuda_context.h"

namespace rotor {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  data_ = device_alloc(bytes, device);
}

Storage::~Storage() {
  try {
    device_free(data_, bytes_, device_);
  } catch (...) {
    // Freeing during teardown of a failed CUDA context must not terminate.
  }
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) ROTOR_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

namespace {
// Converts host floats into the bytes of `dtype`.
std::vector<uint8_t> encode_floats(const std::vector<float>& v, DType dtype) {
  std::vector<uint8_t> out(v.size() * dtype_size(dtype));
  switch (dtype) {
    case DType::F32:
      std::memcpy(out.data(), v.data(), out.size());
      break;
    case DType::F16: {
      auto* p = reinterpret_cast<uint16_t*>(out.data());
      for (size_t i = 0; i < v.size(); ++i) p[i] = float_to_half_bits(v[i]);
      break;
    }
    case DType::BF16: {
      auto* p = reinterpret_cast<uint16_t*>(out.data());
      for (size_t i = 0; i < v.size(); ++i) p[i] = float_to_bf16_bits(v[i]);
      break;
    }
    case DType::I32: {
      auto* p = reinterpret_cast<int32_t*>(out.data());
      for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<int32_t>(v[i]);
      break;
    }
    case DType::U8:
      for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<uint8_t>(v[i]);
      break;
  }
  return out;
}

void upload(Tensor& t, const void* host) {
  if (t.is_cpu())
    std::memcpy(t.raw(), host, t.nbytes());
  else
    cuda::memcpy(t.raw(), host, t.nbytes(), cuda::CopyKind::HostToDevice, t.device().index);
}
}  // namespace

Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape, DType dtype,
                           Device device) {
  ROTOR_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "{} values for shape {}",
              values.size(), shape_str(shape));
  Tensor t = empty(shape, dtype, device);
  auto bytes = encode_floats(values, dtype);
  upload(t, bytes.data());
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, const Shape& shape, Device device) {
  ROTOR_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "{} values for shape {}",
              values.size(), shape_str(shape));
  Tensor t = empty(shape, DType::I32, device);
  upload(t, values.data());
  return t;
}

Tensor Tensor::from_bytes(const std::vector<uint8_t>& values, const Shape& shape, Device device) {
  ROTOR_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "{} values for shape {}",
              values.size(), shape_str(shape));
  Tensor t = empty(shape, DType::U8, device);
  upload(t, values.data());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype, Device device) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)), value);
  return from_floats(v, shape, dtype, device);
}

int64_t Tensor::size(int64_t i) const {
  int64_t n = dim();
  if (i < 0) i += n;
  ROTOR_CHECK(i >= 0 && i < n, "dimension {} out of range for shape {}", i, shape_str(shape_));
  return shape_[static_cast<size_t>(i)];
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ROTOR_CHECK(infer < 0, "view {}: at most one -1", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ROTOR_CHECK(known > 0 && numel_ % known == 0, "cannot view {} as {}", shape_str(shape_),
                shape_str(shape));
    s[static_cast<size_t>(infer)] = numel_ / known;
  }
  ROTOR_CHECK(shape_numel(s) == numel_, "cannot view {} as {}", shape_str(shape_),
              shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::narrow(int64_t begin, int64_t length) const {
  ROTOR_CHECK(dim() >= 1, "narrow of a scalar tensor");
  ROTOR_CHECK(begin >= 0 && length >= 0 && begin + length <= shape_[0],
              "narrow({}, {}) out of range for shape {}", begin, length, shape_str(shape_));
  int64_t row = shape_[0] ? numel_ / shape_[0] : 0;
  Tensor t = *this;
  t.shape_[0] = length;
  t.numel_ = row * length;
  t.offset_ = offset_ + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::select(int64_t i) const {
  Tensor t = narrow(i, 1);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::to(Device device) const {
  if (this->device() == device) return *this;
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  ROTOR_CHECK(src.dtype_ == dtype_, "copy_from: dtype {} into {}", dtype_name(src.dtype_),
              dtype_name(dtype_));
  ROTOR_CHECK(src.numel_ == numel_, "copy_from: {} elements into {}", src.numel_, numel_);
  if (nbytes() == 0) return;
  Device sd = src.device(), dd = device();
  if (sd.is_cpu() && dd.is_cpu()) {
    std::memmove(raw(), src.raw(), nbytes());
  } else if (sd.is_cpu()) {
    cuda::memcpy(raw(), src.raw(), nbytes(), cuda::CopyKind::HostToDevice, dd.index);
  } else if (dd.is_cpu()) {
    cuda::memcpy(raw(), src.raw(), nbytes(), cuda::CopyKind::DeviceToHost, sd.index);
  } else {
    cuda::memcpy(raw(), src.raw(), nbytes(), cuda::CopyKind::DeviceToDevice, dd.index);
  }
}

void Tensor::zero_() {
  if (nbytes() == 0) return;
  if (is_cpu())
    std::memset(raw(), 0, nbytes());
  else
    cuda::memset_zero(raw(), nbytes(), device().index);
}

std::vector<float> Tensor::to_floats() const {
  Tensor h = to(Device::cpu());
  std::vector<float> out(static_cast<size_t>(numel_));
  const void* p = h.raw();
  switch (dtype_) {
    case DType::F32:
      std::memcpy(out.data(), p, nbytes());
      break;
    case DType::F16:
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = half_bits_to_float(static_cast<const uint16_t*>(p)[i]);
      break;
    case DType::BF16:
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
      break;
    case DType::I32:
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<float>(static_cast<const int32_t*>(p)[i]);
      break;
    case DType::U8:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<const uint8_t*>(p)[i];
      break;
  }
  return out;
}

std::vector<int32_t> Tensor::to_ints() const {
  Tensor h = to(Device::cpu());
  std::vector<int32_t> out(static_cast<size_t>(numel_));
  if (dtype_ == DType::I32) {
    std::memcpy(out.data(), h.raw(), nbytes());
  } else if (dtype_ == DType::U8) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<const uint8_t*>(h.raw())[i];
  } else {
    auto f = h.to_floats();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(f[i]);
  }
  return out;
}

float Tensor::item() const {
  ROTOR_CHECK(numel_ == 1, "item() of a tensor with {} elements", numel_);
  return to_floats()[0];
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " on " + device().str();
}

void check_shape(const Tensor& t, const Shape& shape, const char* what) {
  if (t.shape() != shape)
    ROTOR_FAIL("{}: expected shape {}, got {}", what, shape_str(shape), shape_str(t.shape()));
}

void check_same_device(const Tensor& a, const Tensor& b, const char* what) {
  if (a.device() != b.device())
    ROTOR_FAIL("{}: tensors on {} and {}", what, a.device().str(), b.device().str());
}

}  // namespace rotor
