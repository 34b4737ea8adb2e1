// The residual wrapper around a sublayer f, post-LN or pre-LN:
//   post (Transformer-base): y = LN(x + dropout(f(x)))
//   pre:                     y = x + dropout(f(LN(x)))
// Use: h = r.begin(x); y = r.end(x, f(h)); and backward in reverse:
//   d_fx = r.end_backward(dy); dx = r.begin_backward(f.backward(d_fx)).
#pragma once

#include <string>

#include "nn/layers.h"

namespace rotor::nn {

class Residual {
 public:
  Residual(ParameterStore& store, const std::string& norm_name, int64_t d_model, float eps,
           float dropout, bool post_norm, bool rms_norm = false)
      : norm_(store, norm_name, d_model, eps, rms_norm),
        dropout_(store, dropout),
        post_(post_norm) {}

  // x [N, d] -> the input of the sublayer.
  Tensor begin(const Tensor& x, const Context& ctx);
  // x [N, d], fx [N, d] -> y [N, d].
  Tensor end(const Tensor& x, const Tensor& fx, const Context& ctx);
  Tensor end_backward(const Tensor& dy);
  Tensor begin_backward(const Tensor& d_sublayer_input);

  // Inference without saving state.
  Tensor apply_begin(const Tensor& x, const Context& ctx) const;
  Tensor apply_end(const Tensor& x, const Tensor& fx, const Context& ctx) const;
  // Drops what begin and end saved for the backward (activation checkpointing).
  void release() { norm_.release(); }

 private:
  LayerNorm norm_;
  Dropout dropout_;
  bool post_;
  Tensor d_residual_;  // [N, d], the gradient flowing around the sublayer
};

}  // namespace rotor::nn
