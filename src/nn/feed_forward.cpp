#include "nn/feed_forward.h"

#include "ops/elementwise.h"

namespace rotor::nn {

Linear FeedForward::make_fc1(ParameterStore& store, const std::string& fc1,
                             const FeedForwardOptions& o) {
  if (!o.gated) return Linear(store, fc1, o.d_model, o.d_ff, o.bias, o.init, o.activation);
  // [gate | value]: the gate's rows first, one GEMM for both.
  return Linear(store, {fc1 + "_gate", fc1}, o.d_model, {o.d_ff, o.d_ff}, o.bias, o.init);
}

FeedForward::FeedForward(ParameterStore& store, const std::string& fc1, const std::string& fc2,
                         const FeedForwardOptions& o)
    : activation_(o.activation),
      gated_(o.gated),
      d_ff_(o.d_ff),
      fc1_(make_fc1(store, fc1, o)),
      fc2_(store, fc2, o.d_ff, o.d_model, o.bias, o.init),
      dropout_(store, o.activation_dropout) {}

Tensor FeedForward::forward(const Tensor& x, const Context& ctx) {
  Tensor h = fc1_.forward(x, ctx);  // [N, d_ff], gated [N, 2 d_ff]
  if (gated_) {
    gate_value_ = h;
    h = ctx.empty({x.size(0), d_ff_});  // [N, d_ff]
    ops::glu_forward(gate_value_, h, activation_);
  }
  h = dropout_.forward(h, ctx);
  return fc2_.forward(h, ctx);
}

Tensor FeedForward::backward(const Tensor& dy) {
  Tensor dh = fc2_.backward(dy);  // [N, d_ff]
  dh = dropout_.backward(dh);
  if (gated_) {
    ROTOR_CHECK(gate_value_.defined(), "feed-forward backward without forward");
    Tensor dgv = Tensor::empty(gate_value_.shape(), dh.dtype(), dh.device());  // [N, 2 d_ff]
    ops::glu_backward(dh, gate_value_, dgv, activation_);
    gate_value_ = Tensor();
    dh = dgv;
  }
  return fc1_.backward(dh);
}

Tensor FeedForward::apply(const Tensor& x, const Context& ctx) const {
  Tensor h = fc1_.apply(x, ctx);  // [N, d_ff], gated [N, 2 d_ff]
  if (gated_) {
    Tensor a = ctx.empty({x.size(0), d_ff_});  // [N, d_ff]
    ops::glu_forward(h, a, activation_);
    h = a;
  }
  return fc2_.apply(h, ctx);
}

}  // namespace rotor::nn
