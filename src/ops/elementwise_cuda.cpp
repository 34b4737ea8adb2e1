// CUDA glue for the element-wise ops (src/ops/elementwise.h).
#if ROTOR_WITH_CUDA

#include "kernels/elementwise.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

using cuda_glue::DeviceScope;
using cuda_glue::to_act;

void fill(Tensor& x, float value) {
  DeviceScope s(x);
  ROTOR_CUDA_CHECK(kernels::fill(x.raw(), x.dtype(), x.numel(), value, s.stream()));
}

void cast(const Tensor& src, Tensor& dst) {
  DeviceScope s(dst);
  if (src.dtype() == dst.dtype()) {
    if (src.raw() != dst.raw())
      ROTOR_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                       s.stream()));
    return;
  }
  ROTOR_CUDA_CHECK(
      kernels::cast(src.raw(), src.dtype(), dst.raw(), dst.dtype(), dst.numel(), s.stream()));
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceScope s(out);
  ROTOR_CUDA_CHECK(kernels::add(a.raw(), b.raw(), out.raw(), out.dtype(), out.numel(), s.stream()));
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceScope s(out);
  ROTOR_CUDA_CHECK(kernels::mul(a.raw(), b.raw(), out.raw(), out.dtype(), out.numel(), s.stream()));
}

void scale(Tensor& x, float sc) {
  DeviceScope s(x);
  ROTOR_CUDA_CHECK(kernels::scale(x.raw(), x.dtype(), x.numel(), sc, s.stream()));
}

void axpby(float alpha, const Tensor& x, float beta, Tensor& y) {
  DeviceScope s(y);
  ROTOR_CUDA_CHECK(kernels::axpby(alpha, x.raw(), beta, y.raw(), y.dtype(), y.numel(), s.stream()));
}

void add_bias(Tensor& x, const Tensor& bias) {
  DeviceScope s(x);
  const int64_t n = bias.numel();
  if (n == 0) return;
  ROTOR_CUDA_CHECK(kernels::add_bias(x.raw(), x.dtype(), bias.raw(), bias.dtype(), x.numel() / n, n,
                                     s.stream()));
}

void activation_forward(const Tensor& x, Tensor& y, Activation act) {
  DeviceScope s(y);
  ROTOR_CUDA_CHECK(
      kernels::activation_forward(x.raw(), y.raw(), y.dtype(), y.numel(), to_act(act), s.stream()));
}

void activation_backward(const Tensor& dy, const Tensor& x, Tensor& dx, Activation act) {
  DeviceScope s(dx);
  ROTOR_CUDA_CHECK(kernels::activation_backward(dy.raw(), x.raw(), dx.raw(), dx.dtype(), dx.numel(),
                                                to_act(act), s.stream()));
}

void glu_forward(const Tensor& h, Tensor& y, Activation act) {
  DeviceScope s(y);
  const int64_t F = y.size(-1);
  ROTOR_CUDA_CHECK(kernels::glu_forward(h.raw(), y.raw(), y.dtype(), F ? y.numel() / F : 0, F,
                                        to_act(act), s.stream()));
}

void glu_backward(const Tensor& dy, const Tensor& h, Tensor& dh, Activation act) {
  DeviceScope s(dh);
  const int64_t F = dy.size(-1);
  ROTOR_CUDA_CHECK(kernels::glu_backward(dy.raw(), h.raw(), dh.raw(), dh.dtype(),
                                         F ? dy.numel() / F : 0, F, to_act(act), s.stream()));
}

void tanh_forward(const Tensor& x, Tensor& y) {
  DeviceScope s(y);
  ROTOR_CUDA_CHECK(kernels::tanh_forward(x.raw(), y.raw(), y.dtype(), y.numel(), s.stream()));
}

void tanh_backward(const Tensor& dy, const Tensor& y, Tensor& dx) {
  DeviceScope s(dx);
  ROTOR_CUDA_CHECK(
      kernels::tanh_backward(dy.raw(), y.raw(), dx.raw(), dx.dtype(), dx.numel(), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
