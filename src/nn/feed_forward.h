// Position-wise feed-forward: fc2(dropout(act(fc1(x)))), the activation fused
// into fc1's GEMM epilogue.
#pragma once

#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/linear.h"

namespace rotor::nn {

class FeedForward {
 public:
  FeedForward(ParameterStore& store, const std::string& fc1, const std::string& fc2,
              int64_t d_model, int64_t d_ff, ops::Activation activation, float activation_dropout,
              Init init);
  Tensor forward(const Tensor& x, const Context& ctx);  // x [N, d]
  Tensor backward(const Tensor& dy);
  Tensor apply(const Tensor& x, const Context& ctx) const;
  // Drops what forward saved for the backward (activation checkpointing).
  void release() {
    fc1_.release();
    fc2_.release();
  }

 private:
  Linear fc1_, fc2_;
  Dropout dropout_;
};

}  // namespace rotor::nn
