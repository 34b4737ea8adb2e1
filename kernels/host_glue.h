// Helpers for the host glue in src/ops/*_cuda.cpp (C++ only, never included by
// a .cu file): the device scope and stream of an op, argument checks and
// stream-ordered scratch memory from the pool.
#pragma once

#if ROTOR_WITH_CUDA

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "core/cuda_context.h"
#include "core/error.h"
#include "core/tensor.h"

namespace rotor::ops::cuda_glue {

// Makes the device of `t` current for the scope and names its rotor stream.
class DeviceScope {
 public:
  DeviceScope(const Tensor& t, const char* what) : index_(t.device().index) {
    ROTOR_CHECK(t.is_cuda(), "{}: expected a CUDA tensor, got {}", what, t.str());
    prev_ = cuda::current_device();
    if (prev_ != index_) cuda::set_device(index_);
    stream_ = static_cast<cudaStream_t>(cuda::stream(index_));
  }
  ~DeviceScope() {
    if (prev_ != index_) (void)cudaSetDevice(prev_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }

 private:
  int index_ = 0, prev_ = 0;
  cudaStream_t stream_ = nullptr;
};

inline void require_on(const Tensor& t, int index, const char* what) {
  ROTOR_CHECK(t.defined(), "{}: undefined tensor", what);
  ROTOR_CHECK(t.is_cuda() && t.device().index == index, "{}: {} is not on cuda:{}", what, t.str(),
              index);
}
inline void require_floating(const Tensor& t, const char* what) {
  if (!is_floating(t.dtype()))
    ROTOR_FAIL("{}: expected a floating tensor (f32, f16, bf16), got {}", what, t.str());
}
inline void require_dtype(const Tensor& t, DType d, const char* what) {
  if (t.dtype() != d) ROTOR_FAIL("{}: expected {}, got {}", what, dtype_name(d), t.str());
}
inline void require_same_numel(const Tensor& a, const Tensor& b, const char* what) {
  if (a.numel() != b.numel())
    ROTOR_FAIL("{}: element counts differ: {} vs {}", what, a.str(), b.str());
}
inline int64_t last_dim(const Tensor& t) {
  return t.dim() == 0 ? 1 : t.size(-1);
}

// Stream-ordered scratch memory from rotor's pool, freed (stream-ordered) at
// scope exit: later work on the same stream may reuse it safely.
class Scratch {
 public:
  Scratch(size_t bytes, int index) : bytes_(bytes), index_(index) {
    ptr_ = bytes ? cuda::pool_alloc(bytes, index) : nullptr;
  }
  ~Scratch() {
    if (ptr_) {
      try {
        cuda::pool_free(ptr_, bytes_, index_);
      } catch (...) {
      }
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int index_ = 0;
};

}  // namespace rotor::ops::cuda_glue

#endif  // ROTOR_WITH_CUDA
