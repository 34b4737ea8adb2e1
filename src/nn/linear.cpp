#include "nn/linear.h"

#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace rotor::nn {

Linear::Linear(ParameterStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias,
               Init weight_init, ops::Activation activation)
    : Linear(store, std::vector<std::string>{prefix}, in, std::vector<int64_t>{out}, bias,
             weight_init) {
  activation_ = activation;
}

Linear::Linear(ParameterStore& store, const std::vector<std::string>& prefixes, int64_t in,
               const std::vector<int64_t>& outs, bool bias, Init weight_init)
    : store_(&store), in_(in), out_(0), activation_(ops::Activation::None) {
  for (size_t i = 0; i < prefixes.size(); ++i) {
    weights_.push_back(store.add(prefixes[i] + ".weight", {outs[i], in}, weight_init));
    out_ += outs[i];
  }
  if (bias)
    for (size_t i = 0; i < prefixes.size(); ++i)
      biases_.push_back(store.add(prefixes[i] + ".bias", {outs[i]}, Init::zeros(), true));
}

Tensor Linear::apply(const Tensor& x, const Context& ctx) const {
  ROTOR_CHECK(x.dim() == 2 && x.size(1) == in_, "linear: input {} for {} inputs", x.str(), in_);
  Tensor y = ctx.empty({x.size(0), out_});  // [N, out]
  ops::GemmOptions o;
  o.trans_b = true;
  o.bias = bias(ctx.dtype);
  o.activation = activation_;
  ops::gemm(x, weight(ctx.dtype), y, o);
  return y;
}

Tensor Linear::forward(const Tensor& x, const Context& ctx) {
  ROTOR_CHECK(x.dim() == 2 && x.size(1) == in_, "linear: input {} for {} inputs", x.str(), in_);
  x_ = x;
  Tensor y = ctx.empty({x.size(0), out_});  // [N, out]
  ops::GemmOptions o;
  o.trans_b = true;
  o.bias = bias(ctx.dtype);
  o.activation = activation_;
  if (activation_ != ops::Activation::None) {
    pre_ = ctx.empty({x.size(0), out_});
    o.pre_activation = pre_;
  }
  ops::gemm(x, weight(ctx.dtype), y, o);
  return y;
}

Tensor Linear::backward(const Tensor& dy, bool need_dx) {
  ROTOR_CHECK(x_.defined(), "linear backward without forward");
  Tensor dz = dy;  // [N, out]
  if (activation_ != ops::Activation::None) {
    dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    ops::activation_backward(dy, pre_, dz, activation_);
  }
  // dW += dz^T x: [out, N] x [N, in]
  Tensor dw = weight_grad();  // f32 [out, in]
  ops::GemmOptions gw;
  gw.trans_a = true;
  gw.beta = 1.0f;
  ops::gemm(dz, x_, dw, gw);
  if (!biases_.empty()) {
    Tensor db = bias_grad();  // f32 [out]
    ops::sum_rows(dz, db, true);
  }
  Tensor dx;  // [N, in], undefined when !need_dx
  if (need_dx) {
    dx = Tensor::empty({dz.size(0), in_}, dz.dtype(), dz.device());
    ops::gemm(dz, weight(dz.dtype()), dx, {});
  }
  x_ = Tensor();
  pre_ = Tensor();
  return dx;
}

}  // namespace rotor::nn
