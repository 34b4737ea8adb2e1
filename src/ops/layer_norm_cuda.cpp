// CUDA glue for layer normalization (src/ops/layer_norm.h).
#if ROTOR_WITH_CUDA

#include <initializer_list>

#include "kernels/host_glue.h"
#include "kernels/layer_norm.cuh"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

using cuda_glue::DeviceScope;
using cuda_glue::require_on;

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd) {
  DeviceScope s(x, "layer_norm_forward");
  const int dev = s.index();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&gamma, &beta, &y, &mean, &rstd}) require_on(*t, dev, "layer_norm_forward");
  cuda_glue::require_floating(x, "layer_norm_forward: x");
  cuda_glue::require_floating(gamma, "layer_norm_forward: gamma");
  if (beta.dtype() != gamma.dtype() || y.dtype() != x.dtype())
    ROTOR_FAIL("layer_norm_forward: beta must match gamma and y must match x");
  cuda_glue::require_dtype(mean, DType::F32, "layer_norm_forward: mean");
  cuda_glue::require_dtype(rstd, DType::F32, "layer_norm_forward: rstd");
  const int64_t n = cuda_glue::last_dim(x);
  if (n == 0) return;
  const int64_t rows = x.numel() / n;
  if (gamma.numel() != n || beta.numel() != n || mean.numel() != rows || rstd.numel() != rows ||
      y.numel() != x.numel())
    ROTOR_FAIL("layer_norm_forward: shapes do not match x {}", x.str());
  ROTOR_CUDA_CHECK(kernels::layer_norm_forward(x.raw(), gamma.raw(), beta.raw(), x.dtype(),
                                               gamma.dtype(), rows, n, eps, y.raw(),
                                               mean.data<float>(), rstd.data<float>(), s.stream()));
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                         const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta) {
  DeviceScope s(x, "layer_norm_backward");
  const int dev = s.index();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta})
    require_on(*t, dev, "layer_norm_backward");
  cuda_glue::require_floating(x, "layer_norm_backward: x");
  cuda_glue::require_floating(gamma, "layer_norm_backward: gamma");
  cuda_glue::require_floating(dgamma, "layer_norm_backward: dgamma");
  cuda_glue::require_floating(dbeta, "layer_norm_backward: dbeta");
  if (dy.dtype() != x.dtype() || dx.dtype() != x.dtype())
    ROTOR_FAIL("layer_norm_backward: dy and dx must match x ({})", dtype_name(x.dtype()));
  cuda_glue::require_dtype(mean, DType::F32, "layer_norm_backward: mean");
  cuda_glue::require_dtype(rstd, DType::F32, "layer_norm_backward: rstd");
  const int64_t n = cuda_glue::last_dim(x);
  if (n == 0) return;
  const int64_t rows = x.numel() / n;
  if (gamma.numel() != n || dgamma.numel() != n || dbeta.numel() != n || mean.numel() != rows ||
      rstd.numel() != rows || dy.numel() != x.numel() || dx.numel() != x.numel())
    ROTOR_FAIL("layer_norm_backward: shapes do not match x {}", x.str());
  const int splits = kernels::layer_norm_backward_splits(rows);
  cuda_glue::Scratch partial(sizeof(float) * 2 * static_cast<size_t>(splits * n), dev);  // [2, splits, n]
  ROTOR_CUDA_CHECK(kernels::layer_norm_backward(
      dy.raw(), x.raw(), gamma.raw(), x.dtype(), gamma.dtype(), mean.data<float>(),
      rstd.data<float>(), rows, n, dx.raw(), dgamma.raw(), dgamma.dtype(), dbeta.raw(),
      dbeta.dtype(), partial.as<float>(), splits, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
