// The encoder-only model for masked-LM pretraining: BERT (Devlin et al. 2019)
// and RoFormer (Su et al. 2021, the same model with rotary self-attention and
// no absolute position embedding), Hugging Face BertForMaskedLM /
// RoFormerForMaskedLM layout:
//
//   embeddings  word (no sqrt(d) scale) + token type + position (learned for
//               BERT; sinusoidal optional; none for RoFormer) -> LayerNorm -> dropout
//   encoder     num layers x BertLayer (post-LN, GELU), RoPE in self-attention
//               when position == rope
//   MLM head    dense -> GELU -> LayerNorm -> decoder tied to the word
//               embedding, plus its own bias cls.predictions.bias
//
// Parameter names are exactly Hugging Face's, under `bert.` (learned,
// sinusoidal, none) or `roformer.` (rope):
//   P.embeddings.word_embeddings.weight          [V, d]
//   P.embeddings.position_embeddings.weight      [max_positions, d]  (learned only)
//   P.embeddings.token_type_embeddings.weight    [type_vocab_size, d] (when > 0)
//   P.embeddings.LayerNorm.{weight,bias}
//   P.encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}
//   P.encoder.layer.{i}.attention.output.{dense,LayerNorm}.{weight,bias}
//   P.encoder.layer.{i}.intermediate.dense.{weight,bias}
//   P.encoder.layer.{i}.output.{dense,LayerNorm}.{weight,bias}
//   cls.predictions.transform.dense.{weight,bias}
//   cls.predictions.transform.LayerNorm.{weight,bias}
//   cls.predictions.bias                         [V]
// The export (train/export_hf.h) adds the tied cls.predictions.decoder.*.
//
// The loss is computed on the masked positions only: the batch lists them
// (flat indices into [B*T]) with their original ids, the final hidden states
// are gathered there, and the [M, V] logits are the only vocabulary-sized
// tensor (M ~ 15% of the tokens). So no ignore_index is needed; -1 is passed
// to the cross-entropy (never a valid target).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/position.h"
#include "nn/time2vec.h"
#include "nn/transformer_layers.h"

namespace rotor::models {

// bert-base-uncased's layer: 768 wide, 12 heads, FFN 3072 with GELU, post-LN,
// dropout 0.1 (hidden and attention), LayerNorm eps 1e-12.
inline nn::LayerOptions bert_base_layer() {
  nn::LayerOptions l;
  l.d_model = 768;
  l.n_heads = 12;
  l.d_ff = 3072;
  l.activation = ops::Activation::GELU;
  l.dropout = 0.1f;
  l.attention_dropout = 0.1f;
  l.post_norm = true;
  l.layer_norm_eps = 1e-12f;
  return l;
}

// Hugging Face BertLayer/RoFormerLayer names of layer PREFIX (e.g.
// "bert.encoder.layer.0"; the list in the comment at the top of this file).
nn::EncoderLayerNames bert_layer_names(const std::string& prefix);

struct BertOptions {
  int64_t vocab_size = 0;
  int pad_id = 0;
  int64_t num_layers = 12;
  // d_model, heads, d_ff, dropouts, eps, rope base, attention core. BERT is
  // post-LN with GELU; its weights are drawn from N(0, init_std).
  nn::LayerOptions layer = bert_base_layer();
  nn::PositionKind position = nn::PositionKind::Learned;
  int64_t max_positions = 512;
  int64_t type_vocab_size = 2;  // 0: no token type embedding (EHR: the visit segment)
  // EHR inputs (BEHRT): an age embedding table of this many age ids summed at
  // the input (P.embeddings.age_embeddings.weight [age_vocab_size, d]); 0: none.
  int64_t age_vocab_size = 0;
  // With k > 0, ages enter by Time2Vec with k periodic terms of age id /
  // age_vocab_size (nn/time2vec.h; P.embeddings.age_time2vec.*) instead of
  // the table.
  int64_t age_time2vec = 0;
  // Positions count visits (model.position_source visit): the batch's
  // position ids index the position table or rotate q and k, instead of the
  // token index.
  bool visit_positions = false;
  // model.position tupe: also T5's bucketed bias (TUPE-R, model.tupe.relative,
  // with layer's t5 settings).
  bool tupe_relative = false;
  nn::DebertaOptions deberta;  // model.position deberta: model.deberta's settings
  double init_std = 0.02;      // embeddings and every weight
  // The Hugging Face family of the position encoding ("roformer" for rope,
  // else "bert"): the prefix of the parameter names.
  std::string prefix() const { return std::string(position->hf.family); }
};

// The inputs of the encoder: ids i32 [B, T]; token types (segments) i32
// [B, T] or undefined (segment 0); lengths i32 [B] or undefined (no
// padding); age ids i32 [B, T] (with age_vocab_size > 0); position ids i32
// [B, T] (with visit_positions: BEHRT's visit indices; else unused).
// Packed documents (data.packing documents): `documents` holds each token's
// document index in its row, host [B*T] (-1 for padding; empty: none); a
// maximal run of one index is a document. Attention then stays within each
// document (nn::DocLayout), lengths are not needed, and positions count from
// 0 in each document (or are the visit positions, which restart with each
// patient).
struct EncoderInputs {
  Tensor input_ids, token_type_ids, lengths, age_ids, position_ids;  // [B, T] each, lengths [B]
  std::vector<int32_t> documents;
};

// The BERT/RoFormer encoder: embeddings and layers (the `bert.` or
// `roformer.` parameters above), shared by the masked-LM model and the
// sequence classifier (models/bert_classifier.h).
class BertEncoder {
 public:
  BertEncoder(const BertOptions& options, nn::ParameterStore& store);

  // ids i32 [B, T], token types (or undefined: segment 0), lengths i32 [B]
  // (or undefined: no padding) -> the final hidden states [B, T, d]; keeps
  // what backward needs.
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids, const Tensor& lengths,
                 const nn::Context& ctx);
  // The same with every input (EncoderInputs); a rotor::Error when the
  // options need age or position ids the inputs lack.
  Tensor forward(const EncoderInputs& inputs, const nn::Context& ctx);
  // dh [B, T, d] of the last forward -> parameter gradients (accumulated).
  // Reports the layers, then the embeddings, to ctx.grad_ready (the word
  // embedding last: a tied head must have added its gradient before).
  void backward(const Tensor& dh, const nn::Context& ctx);

  nn::Embedding& word() { return *word_; }
  const nn::Embedding& word() const { return *word_; }
  const BertOptions& options() const { return options_; }

 private:
  BertOptions options_;
  nn::ParameterStore* store_;
  std::unique_ptr<nn::Embedding> word_, token_type_, age_;
  std::unique_ptr<nn::Time2Vec> age_t2v_;  // instead of age_ (age_time2vec > 0)
  std::unique_ptr<nn::PositionEncoding> position_;
  std::unique_ptr<nn::LayerNorm> emb_norm_;
  std::unique_ptr<nn::Dropout> emb_drop_;
  // T5's bias (model.position t5, or tupe with tupe_relative) and TUPE's
  // correlation (model.position tupe), in the embeddings' range.
  std::unique_ptr<nn::RelativeBias> rel_;
  std::unique_ptr<nn::TupeBias> tupe_;
  std::unique_ptr<nn::DebertaRelative> deberta_;  // model.position deberta
  std::vector<std::unique_ptr<nn::EncoderLayer>> layers_;
  nn::ParamRange embeddings_range_;
  std::vector<nn::ParamRange> layer_ranges_;
  Tensor ids_, types_, ages_, positions_;  // i32 [B*T], saved for backward
  std::vector<int32_t> host_positions_;    // positions_ on the host (RoPE)
  std::optional<nn::DocLayout> docs_;      // the forward's packed documents
  int64_t B_ = 0, T_ = 0;
};

// One masked-LM batch (tensors on the model's device).
struct MlmBatch {
  Tensor input_ids;           // i32 [B, T]: masked inputs, right-padded with pad_id
  Tensor token_type_ids;      // i32 [B, T], or undefined = every token in segment 0
  Tensor lengths;             // i32 [B]: non-pad tokens per row (key padding)
  Tensor age_ids;             // i32 [B, T] (EHR), or undefined
  Tensor position_ids;        // i32 [B, T]: visit indices (EHR), or undefined
  Tensor masked_positions;    // i32 [M]: flat indices b * T + t of the tokens to predict
  Tensor masked_targets;      // i32 [M]: their original ids
  int64_t tokens = 0;         // non-pad tokens
  int64_t masked_tokens = 0;  // M: the loss's token count (normalizer)
  // Packed documents: each token's document index in its row, host [B*T]
  // (-1: padding); empty: none (EncoderInputs).
  std::vector<int32_t> documents;
  MlmBatch to(Device device) const;
};

struct MlmSums {
  double loss = 0;      // -log p(original id), summed over the masked tokens
  int64_t tokens = 0;   // masked tokens (M)
  int64_t correct = 0;  // masked tokens whose argmax is the original id
  // Counted on every device, in training too (ops::count_top1_hits: the
  // logits stay on the device, [M] flags reach the host).
  bool has_correct = false;
};

class BertForMaskedLM {
 public:
  BertForMaskedLM(const BertOptions& options, nn::ParameterStore& store);

  // Forward and loss; keeps what backward needs. Returns host sums.
  MlmSums forward_loss(const MlmBatch& batch, const nn::Context& ctx);
  // Backward of forward_loss: d(loss_sum * loss_scale); accumulates into the
  // store's gradients.
  void backward(float loss_scale);

  // Inference: ids i32 [B, T], token types (or undefined), lengths i32 [B]
  // (or undefined: no padding) -> logits f32 [B, T, V].
  Tensor forward_logits(const Tensor& input_ids, const Tensor& token_type_ids,
                        const Tensor& lengths, const nn::Context& ctx);
  // The final hidden states [B, T, d] (before the MLM head).
  Tensor encode(const Tensor& input_ids, const Tensor& token_type_ids, const Tensor& lengths,
                const nn::Context& ctx);
  Tensor encode(const EncoderInputs& inputs, const nn::Context& ctx);
  // Logits f32 [B, T, V] of every input (EncoderInputs).
  Tensor forward_logits(const EncoderInputs& inputs, const nn::Context& ctx);

  const BertOptions& options() const { return options_; }

 private:
  Tensor head_logits(const Tensor& h, const nn::Context& ctx) const;  // [M, d] -> [M, V]

  BertOptions options_;
  nn::ParameterStore* store_;
  BertEncoder encoder_;
  std::unique_ptr<nn::Linear> transform_;  // dense with GELU fused
  std::unique_ptr<nn::LayerNorm> transform_norm_;
  nn::Parameter* decoder_bias_ = nullptr;  // cls.predictions.bias [V]
  // The head's parameters, reported to Context::grad_ready by backward.
  nn::ParamRange head_range_;

  // Saved by forward_loss for backward.
  int64_t B_ = 0, T_ = 0;
  MlmBatch batch_;
  Tensor head_out_, lse_;  // [M, d], f32 [M]
  nn::Context ctx_;
};

}  // namespace rotor::models
