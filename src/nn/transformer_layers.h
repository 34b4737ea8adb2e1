// Encoder and decoder layers of the Transformer (Vaswani et al. 2017).
//
// One encoder layer serves both models: the translation encoder (Hugging
// Face BART/Marian names, fairseq's Xavier init) and BERT/RoFormer (Hugging
// Face BertLayer/RoFormerLayer names, N(0, init_std) init); only the names
// and the init differ. With rope, queries and keys are rotated inside
// self-attention: RoFormer's layer is this layer with rotary self-attention.
//   post-LN: y = LN(x + dropout(attn(x))),  z = LN(y + dropout(ffn(y)))
//   pre-LN:  y = x + dropout(attn(LN(x))),  z = y + dropout(ffn(LN(y)))
// The FFN activation is fused into the first FFN GEMM.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/feed_forward.h"
#include "nn/recompute.h"
#include "nn/residual.h"

namespace rotor::nn {

struct LayerOptions {
  int64_t d_model = 512, n_heads = 8, d_ff = 2048;
  ops::Activation activation = ops::Activation::ReLU;
  float dropout = 0.1f, attention_dropout = 0.0f, activation_dropout = 0.0f;
  bool post_norm = true;
  float layer_norm_eps = 1e-5f;
  bool rms_norm = false;   // RMSNorm for every norm (model.norm_type rms_norm)
  bool gated_ffn = false;  // model.gated_ffn: act(x W_gate) * x W_1 (nn/feed_forward.h)
  bool bias = true;        // model.bias: the projections' and feed-forwards' biases
  int64_t kv_heads = 0;    // model.kv_heads: key/value heads (0: n_heads; nn/attention.h)
  bool rope = false;
  rope::Params rope_params{};  // model.rope's settings (core/rope.h)
  bool alibi = false;          // self-attention adds ALiBi's bias (model.position alibi)
  // T5's relative bias (model.position t5): each model builds one table per
  // stack with these settings (model.t5's; nn/relative_bias.h) and points
  // relative_bias at it for that stack's layers.
  int64_t t5_buckets = 32, t5_max_distance = 128;
  RelativeBias* relative_bias = nullptr;
  bool xl = false;           // Transformer-XL's relative terms (model.position transformer_xl)
  TupeBias* tupe = nullptr;  // TUPE's shared correlation (model.position tupe)
  DebertaRelative* deberta = nullptr;  // DeBERTa's shared relative rows (model.position deberta)
  AttentionKind attention_kind = AttentionKind::Softmax;  // nn/attention_kind.h
  AttentionImpl impl = AttentionImpl::Auto;  // attention core (config key attention.impl)
  bool rope_in_kernel = false;               // config key attention.rope_in_kernel
  LinearKindOptions linear_attention;        // attention.kind linear's keys (self-attention only)
  // nullopt: fairseq's init (Xavier-uniform weights, q/k/v with gain 1/sqrt(2),
  // zero biases). A value: BERT's, every weight N(0, std), biases zero.
  std::optional<double> normal_init_std;
  // Activation checkpointing (nn/recompute.h; config key
  // train.checkpoint_activations): a training forward keeps only the layer's
  // inputs, the backward recomputes the rest. The gradients are unchanged.
  bool checkpoint = false;
};

// The settings of a stack's T5 bias under layer options `c` (its table's
// heads, model.t5's buckets and reach); bidirectional in an encoder.
inline RelativeBiasOptions relative_bias_options(const LayerOptions& c, bool bidirectional) {
  return {c.n_heads, c.t5_buckets, c.t5_max_distance, bidirectional};
}

// The parameter names of one encoder layer.
struct EncoderLayerNames {
  AttentionNames attention;  // the q, k, v and output projections
  std::string attention_norm, fc1, fc2, final_norm;
};

class EncoderLayer {
 public:
  // causal: each position attends to itself and the positions before it (the
  // layer of a decoder-only LM, models/decoder_lm.h).
  EncoderLayer(ParameterStore& store, const EncoderLayerNames& names, const LayerOptions& c,
               bool causal = false);
  // x [B, T, d], lengths i32 [B] -> [B, T, d]; `positions` (host i32 [B*T]
  // or null) are RoPE's explicit positions, `docs` packed documents
  // (MultiHeadAttention::forward; they must outlive the backward).
  Tensor forward(const Tensor& x, const Tensor& lengths, const Context& ctx,
                 const std::vector<int32_t>* positions = nullptr, const DocLayout* docs = nullptr);
  // With checkpointing, first recomputes the forward from its saved inputs.
  Tensor backward(const Tensor& dy);

  // Incremental decoding of a causal layer (MultiHeadAttention::prefill and
  // step_rows); nothing is kept for a backward. prefill: x [B, T, d] ->
  // [B, T, d], filling `cache` (max_length slots per row). step: x [B, 1, d],
  // row b at positions[b] -> [B, 1, d].
  Tensor prefill(const Tensor& x, MultiHeadAttention::Cache& cache, int64_t max_length,
                 const Context& ctx);
  Tensor step(const Tensor& x, MultiHeadAttention::Cache& cache,
              const std::vector<int64_t>& positions, const Context& ctx);

 private:
  // The forward proper, saving what backward needs; release() drops that.
  Tensor run(const Tensor& x, const Tensor& lengths, const Context& ctx,
             const std::vector<int32_t>* positions, const DocLayout* docs);
  void release();

  MultiHeadAttention attn_;
  Residual attn_res_;
  FeedForward ffn_;
  Residual ffn_res_;
  LayerRecompute recompute_;
  std::optional<std::vector<int32_t>> checkpoint_positions_;  // the forward's explicit positions
  const DocLayout* checkpoint_docs_ = nullptr;                // and its packed documents
  int64_t B_ = 0, T_ = 0, d_;
};

class DecoderLayer {
 public:
  DecoderLayer(ParameterStore& store, const std::string& prefix, const LayerOptions& c);
  // x [B, T, d] (causal), memory [B, S, d] with lengths i32 [B]. Or packed
  // (variable-length) pairs: `docs` the target side's documents and
  // `memory_docs` the source side's (memory_lengths undefined), document n
  // of each one sentence pair; they must outlive the backward.
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths,
                 const Context& ctx, const DocLayout* docs = nullptr,
                 const DocLayout* memory_docs = nullptr);
  // Returns dx and adds the memory gradient into d_memory. With
  // checkpointing, first recomputes the forward from its saved inputs.
  Tensor backward(const Tensor& dy, Tensor& d_memory);

  struct State {
    MultiHeadAttention::Cache self, cross;
  };
  // One position of incremental decoding: x [B, 1, d].
  Tensor step(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths, State& state,
              int64_t position, int64_t max_length, const Context& ctx);

 private:
  // The forward proper, saving what backward needs; release() drops that.
  Tensor run(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths,
             const Context& ctx, const DocLayout* docs, const DocLayout* memory_docs);
  void release();

  MultiHeadAttention self_attn_;
  Residual self_res_;
  MultiHeadAttention cross_attn_;
  Residual cross_res_;
  FeedForward ffn_;
  Residual ffn_res_;
  LayerRecompute recompute_;
  const DocLayout* docs_ = nullptr;         // the forward's packed documents (checkpointing)
  const DocLayout* memory_docs_ = nullptr;  // and the memory's
  int64_t B_ = 0, T_ = 0, d_;
};

}  // namespace rotor::nn
