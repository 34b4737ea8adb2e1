// CUDA glue for the element-wise ops (src/ops/elementwise.h).
#if ROTOR_WITH_CUDA

#include "kernels/elementwise.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {
namespace {

using cuda_glue::DeviceScope;
using cuda_glue::require_on;

kernels::Act to_act(Activation a) {
  switch (a) {
    case Activation::ReLU: return kernels::Act::ReLU;
    case Activation::GELU: return kernels::Act::GELU;
    default: return kernels::Act::None;
  }
}

// Same device, same floating dtype, same element count as `ref`.
void require_like(const Tensor& t, const Tensor& ref, int dev, const char* what) {
  require_on(t, dev, what);
  cuda_glue::require_floating(t, what);
  if (t.dtype() != ref.dtype()) ROTOR_FAIL("{}: dtypes differ: {} vs {}", what, t.str(), ref.str());
  cuda_glue::require_same_numel(t, ref, what);
}

}  // namespace

void fill(Tensor& x, float value) {
  DeviceScope s(x, "fill");
  ROTOR_CUDA_CHECK(kernels::fill(x.raw(), x.dtype(), x.numel(), value, s.stream()));
}

void cast(const Tensor& src, Tensor& dst) {
  DeviceScope s(dst, "cast");
  require_on(src, s.index(), "cast: src");
  cuda_glue::require_floating(src, "cast: src");
  cuda_glue::require_floating(dst, "cast: dst");
  cuda_glue::require_same_numel(src, dst, "cast");
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
  DeviceScope s(out, "add");
  require_like(a, out, s.index(), "add: a");
  require_like(b, out, s.index(), "add: b");
  ROTOR_CUDA_CHECK(kernels::add(a.raw(), b.raw(), out.raw(), out.dtype(), out.numel(), s.stream()));
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceScope s(out, "mul");
  require_like(a, out, s.index(), "mul: a");
  require_like(b, out, s.index(), "mul: b");
  ROTOR_CUDA_CHECK(kernels::mul(a.raw(), b.raw(), out.raw(), out.dtype(), out.numel(), s.stream()));
}

void scale(Tensor& x, float sc) {
  DeviceScope s(x, "scale");
  cuda_glue::require_floating(x, "scale");
  ROTOR_CUDA_CHECK(kernels::scale(x.raw(), x.dtype(), x.numel(), sc, s.stream()));
}

void axpby(float alpha, const Tensor& x, float beta, Tensor& y) {
  DeviceScope s(y, "axpby");
  require_like(x, y, s.index(), "axpby: x");
  ROTOR_CUDA_CHECK(kernels::axpby(alpha, x.raw(), beta, y.raw(), y.dtype(), y.numel(), s.stream()));
}

void add_bias(Tensor& x, const Tensor& bias) {
  DeviceScope s(x, "add_bias");
  require_on(bias, s.index(), "add_bias: bias");
  cuda_glue::require_floating(x, "add_bias: x");
  cuda_glue::require_floating(bias, "add_bias: bias");
  const int64_t n = cuda_glue::last_dim(x);
  if (bias.numel() != n) ROTOR_FAIL("add_bias: bias {} does not match x {}", bias.str(), x.str());
  if (n == 0) return;
  ROTOR_CUDA_CHECK(kernels::add_bias(x.raw(), x.dtype(), bias.raw(), bias.dtype(), x.numel() / n, n,
                                     s.stream()));
}

void activation_forward(const Tensor& x, Tensor& y, Activation act) {
  DeviceScope s(y, "activation_forward");
  require_like(x, y, s.index(), "activation_forward: x");
  ROTOR_CUDA_CHECK(kernels::activation_forward(x.raw(), y.raw(), y.dtype(), y.numel(), to_act(act),
                                               s.stream()));
}

void activation_backward(const Tensor& dy, const Tensor& x, Tensor& dx, Activation act) {
  DeviceScope s(dx, "activation_backward");
  require_like(dy, dx, s.index(), "activation_backward: dy");
  require_like(x, dx, s.index(), "activation_backward: x");
  ROTOR_CUDA_CHECK(kernels::activation_backward(dy.raw(), x.raw(), dx.raw(), dx.dtype(), dx.numel(),
                                                to_act(act), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
