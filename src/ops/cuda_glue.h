// Helpers for the CUDA glue in src/ops/*_cuda.cpp: the device scope and stream
// of an op, and stream-ordered scratch memory from the pool. The glue checks
// no arguments: the public op has (src/ops/dispatch.h).
#pragma once

#if ROTOR_WITH_CUDA

#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda_context.h"
#include "core/tensor.h"
#include "kernels/elementwise.cuh"
#include "ops/gemm.h"  // Activation

namespace rotor::ops::cuda_glue {

// Makes the device of `t` (a CUDA tensor) current for the scope and names its
// rotor stream.
class DeviceScope {
 public:
  explicit DeviceScope(const Tensor& t) : index_(t.device().index) {
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

// The kernels' name of an activation.
inline kernels::Act to_act(Activation a) {
  switch (a) {
    case Activation::ReLU:
      return kernels::Act::ReLU;
    case Activation::GELU:
      return kernels::Act::GELU;
    case Activation::SiLU:
      return kernels::Act::SiLU;
    case Activation::None:
      break;
  }
  return kernels::Act::None;
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
