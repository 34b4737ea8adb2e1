#include "nn/feed_forward.h"

namespace rotor::nn {

FeedForward::FeedForward(ParameterStore& store, const std::string& fc1, const std::string& fc2,
                         int64_t d_model, int64_t d_ff, ops::Activation activation,
                         float activation_dropout, Init init)
    : fc1_(store, fc1, d_model, d_ff, true, init, activation),
      fc2_(store, fc2, d_ff, d_model, true, init),
      dropout_(store, activation_dropout) {}

Tensor FeedForward::forward(const Tensor& x, const Context& ctx) {
  Tensor h = fc1_.forward(x, ctx);  // [N, d_ff]
  h = dropout_.forward(h, ctx);
  return fc2_.forward(h, ctx);
}

Tensor FeedForward::backward(const Tensor& dy) {
  Tensor dh = fc2_.backward(dy);  // [N, d_ff]
  dh = dropout_.backward(dh);
  return fc1_.backward(dh);
}

Tensor FeedForward::apply(const Tensor& x, const Context& ctx) const {
  return fc2_.apply(fc1_.apply(x, ctx), ctx);
}

}  // namespace rotor::nn
