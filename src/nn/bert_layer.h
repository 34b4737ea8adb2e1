// One BERT encoder layer (Devlin et al. 2019; Hugging Face BertLayer /
// RoFormerLayer) with Hugging Face parameter names under PREFIX:
//   PREFIX.attention.self.{query,key,value}.{weight,bias}
//   PREFIX.attention.output.dense.{weight,bias}
//   PREFIX.attention.output.LayerNorm.{weight,bias}
//   PREFIX.intermediate.dense.{weight,bias}
//   PREFIX.output.dense.{weight,bias}
//   PREFIX.output.LayerNorm.{weight,bias}
// Structure: post-LN (BERT), y = LN(x + dropout(attn(x))), z = LN(y + dropout(ffn(y))),
// the FFN activation (GELU in BERT) fused into the intermediate GEMM. With
// rope, queries and keys are rotated inside attention (RoFormer): the
// RoFormerLayer of Hugging Face is this layer with rotary self-attention.
// Init (BERT's _init_weights): weights N(0, init_std), biases 0, LN 1 / 0.
#pragma once

#include <string>

#include "nn/attention.h"
#include "nn/feed_forward.h"
#include "nn/residual.h"

namespace rotor::nn {

struct BertLayerConfig {
  int64_t d_model = 768, n_heads = 12, d_ff = 3072;
  ops::Activation activation = ops::Activation::GELU;
  float dropout = 0.1f;             // hidden_dropout_prob
  float attention_dropout = 0.1f;   // attention_probs_dropout_prob
  float activation_dropout = 0.0f;  // BERT has none
  bool post_norm = true;            // BERT; pre-LN is offered for experiments only
  float layer_norm_eps = 1e-12f;
  bool rope = false;
  float rope_base = 10000.0f;
  double init_std = 0.02;
  AttentionImpl impl = AttentionImpl::Auto;  // attention core (config key attention.impl)
};

class BertLayer {
 public:
  BertLayer(ParameterStore& store, const std::string& prefix, const BertLayerConfig& c);
  // x [B, T, d], lengths i32 [B] (key padding; may be undefined) -> [B, T, d]
  Tensor forward(const Tensor& x, const Tensor& lengths, const Context& ctx);
  // dy [B, T, d] -> dx [B, T, d]; accumulates parameter gradients.
  Tensor backward(const Tensor& dy);

 private:
  MultiHeadAttention attn_;
  Residual attn_res_;
  FeedForward ffn_;
  Residual ffn_res_;
  int64_t B_ = 0, T_ = 0, d_;
};

}  // namespace rotor::nn
