#include "nn/residual.h"

#include "ops/elementwise.h"

namespace rotor::nn {

namespace {
Tensor sum_of(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());  // [shape of a]
  ops::add(a, b, out);
  return out;
}
}  // namespace

Tensor Residual::begin(const Tensor& x, const Context& ctx) {
  return post_ ? x : norm_.forward(x, ctx);
}

Tensor Residual::end(const Tensor& x, const Tensor& fx, const Context& ctx) {
  Tensor s = dropout_.forward_add(x, fx, ctx);  // [N, d] = x + dropout(fx), one pass
  return post_ ? norm_.forward(s, ctx) : s;
}

Tensor Residual::end_backward(const Tensor& dy) {
  d_residual_ = post_ ? norm_.backward(dy) : dy;
  return dropout_.backward(d_residual_);
}

Tensor Residual::begin_backward(const Tensor& d_in) {
  // [N, d]
  Tensor dx = post_ ? sum_of(d_residual_, d_in) : norm_.backward_add(d_in, d_residual_);
  d_residual_ = Tensor();
  return dx;
}

Tensor Residual::apply_begin(const Tensor& x, const Context& ctx) const {
  return post_ ? x : norm_.apply(x, ctx);
}

Tensor Residual::apply_end(const Tensor& x, const Tensor& fx, const Context& ctx) const {
  Tensor s = sum_of(x, fx);  // [N, d]
  return post_ ? norm_.apply(s, ctx) : s;
}

}  // namespace rotor::nn
