// Encoder and decoder layers of the Transformer (Vaswani et al. 2017), with
// Hugging Face BART/Marian parameter names under the given prefix.
#pragma once

#include <memory>
#include <string>

#include "nn/attention.h"
#include "nn/feed_forward.h"
#include "nn/residual.h"

namespace rotor::nn {

struct LayerConfig {
  int64_t d_model = 512, n_heads = 8, d_ff = 2048;
  ops::Activation activation = ops::Activation::ReLU;
  float dropout = 0.1f, attention_dropout = 0.0f, activation_dropout = 0.0f;
  bool post_norm = true;
  float layer_norm_eps = 1e-5f;
  bool rope = false;
  float rope_base = 10000.0f;
  AttentionImpl impl = AttentionImpl::Auto;  // attention core (config key attention.impl)
};

class EncoderLayer {
 public:
  EncoderLayer(ParameterStore& store, const std::string& prefix, const LayerConfig& c);
  // x [B, T, d], lengths i32 [B] -> [B, T, d]
  Tensor forward(const Tensor& x, const Tensor& lengths, const Context& ctx);
  Tensor backward(const Tensor& dy);

 private:
  MultiHeadAttention attn_;
  Residual attn_res_;
  FeedForward ffn_;
  Residual ffn_res_;
  int64_t B_ = 0, T_ = 0, d_;
};

class DecoderLayer {
 public:
  DecoderLayer(ParameterStore& store, const std::string& prefix, const LayerConfig& c);
  // x [B, T, d] (causal), memory [B, S, d] with lengths i32 [B].
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths,
                 const Context& ctx);
  // Returns dx and adds the memory gradient into d_memory.
  Tensor backward(const Tensor& dy, Tensor& d_memory);

  struct State {
    MultiHeadAttention::Cache self, cross;
  };
  // One position of incremental decoding: x [B, 1, d].
  Tensor step(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths, State& state,
              int64_t position, int64_t max_length, const Context& ctx);

 private:
  MultiHeadAttention self_attn_;
  Residual self_res_;
  MultiHeadAttention cross_attn_;
  Residual cross_res_;
  FeedForward ffn_;
  Residual ffn_res_;
  int64_t B_ = 0, T_ = 0, d_;
};

}  // namespace rotor::nn
