// CUDA glue for the row softmax (src/ops/softmax.h).
#if ROTOR_WITH_CUDA

#include "kernels/softmax.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

using cuda_glue::DeviceScope;

void softmax_forward(const Tensor& x, Tensor& y) {
  DeviceScope s(y);
  const int64_t n = y.size(-1);
  if (n == 0) return;
  ROTOR_CUDA_CHECK(
      kernels::softmax_forward(x.raw(), y.raw(), y.dtype(), y.numel() / n, n, s.stream()));
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  DeviceScope s(dx);
  const int64_t n = dx.size(-1);
  if (n == 0) return;
  ROTOR_CUDA_CHECK(kernels::softmax_backward(y.raw(), dy.raw(), dx.raw(), dx.dtype(),
                                             dx.numel() / n, n, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
