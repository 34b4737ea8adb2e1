// CUDA glue for the row softmax (src/ops/softmax.h).
#if ROTOR_WITH_CUDA

#include "kernels/host_glue.h"
#include "kernels/softmax.cuh"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

using cuda_glue::DeviceScope;

namespace {
void require_rows_like(const Tensor& t, const Tensor& ref, int dev, const char* what) {
  cuda_glue::require_on(t, dev, what);
  cuda_glue::require_floating(t, what);
  if (t.shape() != ref.shape() || t.dtype() != ref.dtype())
    ROTOR_FAIL("{}: {} does not match {}", what, t.str(), ref.str());
}
}  // namespace

void softmax_forward(const Tensor& x, Tensor& y) {
  DeviceScope s(y, "softmax_forward");
  require_rows_like(x, y, s.index(), "softmax_forward");
  const int64_t n = cuda_glue::last_dim(y);
  if (n == 0) return;
  ROTOR_CUDA_CHECK(kernels::softmax_forward(x.raw(), y.raw(), y.dtype(), y.numel() / n, n, s.stream()));
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  DeviceScope s(dx, "softmax_backward");
  require_rows_like(y, dx, s.index(), "softmax_backward: y");
  require_rows_like(dy, dx, s.index(), "softmax_backward: dy");
  const int64_t n = cuda_glue::last_dim(dx);
  if (n == 0) return;
  ROTOR_CUDA_CHECK(kernels::softmax_backward(y.raw(), dy.raw(), dx.raw(), dx.dtype(), dx.numel() / n,
                                             n, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
