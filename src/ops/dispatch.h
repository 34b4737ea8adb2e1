// Device dispatch for the op API. Each public op checks its arguments, then
//   ROTOR_DISPATCH_CUDA(x, gemm(a, b, c, options));
// forwards to rotor::ops::cuda_impl (src/ops/*_cuda.cpp, kernels/*.cu) when x
// lives on a GPU, and falls through to the CPU implementation otherwise.
#pragma once

#include "core/error.h"
#include "core/tensor.h"

#if ROTOR_WITH_CUDA
#include "ops/cuda_ops.h"
#define ROTOR_DISPATCH_CUDA(tensor, call) \
  do {                                    \
    if ((tensor).is_cuda()) {             \
      ::rotor::ops::cuda_impl::call;      \
      return;                             \
    }                                     \
  } while (0)
#else
#define ROTOR_DISPATCH_CUDA(tensor, call)                                               \
  do {                                                                                  \
    if ((tensor).is_cuda()) ROTOR_FAIL("a CUDA tensor reached a CPU-only rotor build"); \
  } while (0)
#endif

namespace rotor::ops {
// CPU ops compute in fp32 (16-bit tensors reach their f32 path through f32
// copies, ops/cpu_f32.h): a rotor::Error naming `what` for any other dtype.
inline void require_f32(const Tensor& t, const char* what) {
  if (t.dtype() != DType::F32)
    ROTOR_FAIL("{}: the CPU path computes in f32, got {}", what, dtype_name(t.dtype()));
}
}  // namespace rotor::ops
