// Position-wise feed-forward: fc2(dropout(act(fc1(x)))), the activation fused
// into fc1's GEMM epilogue; or gated (model.gated_ffn; Shazeer 2020, "GLU
// Variants Improve Transformer"; SwiGLU with activation silu, as Llama):
// fc2(dropout(act(x W_gate) * (x W_1))), W_gate (PREFIX_gate of fc1's
// prefix) and W_1 one fused GEMM of 2 d_ff outputs, then ops::glu_forward.
#pragma once

#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/linear.h"

namespace rotor::nn {

struct FeedForwardOptions {
  int64_t d_model = 512, d_ff = 2048;
  ops::Activation activation = ops::Activation::ReLU;
  float activation_dropout = 0.0f;
  Init init = Init::xavier_uniform();
  bool gated = false;  // model.gated_ffn
  bool bias = true;    // model.bias: fc1 (and its gate) and fc2 have biases
};

class FeedForward {
 public:
  // fc1, fc2: the two projections' parameter prefixes (the gate: fc1 + "_gate").
  FeedForward(ParameterStore& store, const std::string& fc1, const std::string& fc2,
              const FeedForwardOptions& options);
  Tensor forward(const Tensor& x, const Context& ctx);  // x [N, d]
  Tensor backward(const Tensor& dy);
  Tensor apply(const Tensor& x, const Context& ctx) const;
  // Drops what forward saved for the backward (activation checkpointing).
  void release() {
    fc1_.release();
    fc2_.release();
    gate_value_ = Tensor();
  }

 private:
  static Linear make_fc1(ParameterStore& store, const std::string& fc1,
                         const FeedForwardOptions& o);
  ops::Activation activation_;
  bool gated_;
  int64_t d_ff_;
  Linear fc1_, fc2_;
  Dropout dropout_;
  Tensor gate_value_;  // gated: fc1's output [N, 2 d_ff], saved for the backward
};

}  // namespace rotor::nn
