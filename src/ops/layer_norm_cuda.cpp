// CUDA glue for layer normalization (src/ops/layer_norm.h).
#if ROTOR_WITH_CUDA

#include "kernels/layer_norm.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

using cuda_glue::DeviceScope;

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd, bool rms) {
  DeviceScope s(x);
  const int64_t n = x.size(-1);
  if (n == 0) return;
  const int64_t rows = x.numel() / n;
  ROTOR_CUDA_CHECK(kernels::layer_norm_forward(
      x.raw(), gamma.raw(), beta.raw(), x.dtype(), gamma.dtype(), rows, n, eps, y.raw(),
      mean.data<float>(), rstd.data<float>(), rms, s.stream()));
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms) {
  DeviceScope s(x);
  const int64_t n = x.size(-1);
  if (n == 0) return;
  const int64_t rows = x.numel() / n;
  const int splits = kernels::layer_norm_backward_splits(rows);
  cuda_glue::Scratch partial(sizeof(float) * 2 * static_cast<size_t>(splits * n),
                             s.index());  // [2, splits, n]
  ROTOR_CUDA_CHECK(kernels::layer_norm_backward(
      dy.raw(), x.raw(), gamma.raw(), x.dtype(), gamma.dtype(), mean.data<float>(),
      rstd.data<float>(), rows, n, dx.raw(), dgamma.raw(), dgamma.dtype(), dbeta.raw(),
      dbeta.dtype(), partial.as<float>(), splits, rms, s.stream()));
}

// On the device the kernel writes dx and an add follows: two passes, as
// before the CPU fused them (the kernel is left as measured).
void layer_norm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                             const Tensor& mean, const Tensor& rstd, const Tensor& residual,
                             Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms) {
  if (dx.raw() == residual.raw()) {  // dx aliases residual: the normalization's dx apart first
    Tensor tmp = Tensor::empty(dx.shape(), dx.dtype(), dx.device());
    layer_norm_backward(dy, x, gamma, mean, rstd, tmp, dgamma, dbeta, rms);
    add(residual, tmp, dx);
    return;
  }
  layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rms);
  add(residual, dx, dx);
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
