// The encoder-decoder Transformer for translation (Vaswani et al. 2017) with
// sinusoidal, learned, rotary (RoFormer) or no position encoding. One joint
// vocabulary. With share_embeddings, source, target and output embeddings
// share one matrix (model.shared.weight); without, the encoder has its own
// (model.encoder.embed_tokens.weight) and the decoder's
// (model.decoder.embed_tokens.weight) is tied to the output projection, as
// fairseq's share_decoder_input_output_embed. Parameter names follow Hugging
// Face BART/Marian.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/transformer_layers.h"

namespace rotor::models {

// Hugging Face BART/Marian names of encoder layer PREFIX (e.g.
// "model.encoder.layers.0"): PREFIX.self_attn.{q,k,v,out}_proj,
// PREFIX.self_attn_layer_norm, PREFIX.fc1, PREFIX.fc2, PREFIX.final_layer_norm.
nn::EncoderLayerNames bart_encoder_layer_names(const std::string& prefix);

struct TransformerOptions {
  int64_t vocab_size = 0;
  int pad_id = 0;
  int64_t encoder_layers = 6, decoder_layers = 6;
  nn::LayerOptions layer;
  nn::PositionKind position = nn::PositionKind::Sinusoidal;
  int64_t max_positions = 1024;
  bool scale_embeddings = true;
  bool share_embeddings = true;
};

// A padded batch of sentence pairs (right padding with pad_id), or a
// variable-length one (data.packing documents): the pairs laid end to end in
// one row per side, B = 1, with each token's pair index in src_documents and
// tgt_documents (the cumulative lengths of cu_seqlens, as segments), and no
// padding at all; src_lengths is then undefined.
struct TranslationBatch {
  Tensor src;              // i32 [B, S]
  Tensor src_lengths;      // i32 [B]
  Tensor tgt_in;           // i32 [B, T]: bos + tokens
  Tensor tgt_out;          // i32 [B, T]: tokens + eos (pad where tgt_in is pad)
  int64_t tgt_tokens = 0;  // non-pad target tokens
  int64_t src_tokens = 0;
  std::vector<int32_t> src_documents, tgt_documents;  // host [S], [T]; empty: padded rows
  bool variable_length() const { return !src_documents.empty(); }
};

struct LossSums {
  double loss = 0;  // label-smoothed, summed over target tokens
  double nll = 0;   // -log p(target), summed
  int64_t tokens = 0;
};

class EncoderDecoder {
 public:
  EncoderDecoder(const TransformerOptions& options, nn::ParameterStore& store);

  // Forward and loss; keeps what backward needs. Returns the sums (host).
  LossSums forward_loss(const TranslationBatch& batch, float label_smoothing,
                        const nn::Context& ctx);
  // Backward of forward_loss: d(loss_sum * loss_scale); accumulates into the
  // store's gradients.
  void backward(float loss_scale);
  // Teacher-forced logits f32 [B*T, V] of the whole target (tests compare
  // incremental decoding against it). Overwrites what the layers saved for a
  // backward: run backward() first.
  Tensor forward_logits(const TranslationBatch& batch, const nn::Context& ctx);

  // ---- inference ----
  Tensor encode(const Tensor& src, const Tensor& src_lengths, const nn::Context& ctx);  // [B, S, d]
  struct DecodeState {
    Tensor memory, memory_lengths;  // [B, S, d], i32 [B]
    std::vector<nn::DecoderLayer::State> layers;
    int64_t position = 0, max_length = 0;
  };
  DecodeState start_decoding(const Tensor& memory, const Tensor& memory_lengths,
                             int64_t max_length);
  // tokens i32 [B] at state.position -> log-probabilities f32 [B, V]; advances the position.
  Tensor decode_step(DecodeState& state, const Tensor& tokens, const nn::Context& ctx);
  // Keeps rows `index` (i32 [B']) of every cache (beam search).
  void reorder(DecodeState& state, const Tensor& index) const;

  const TransformerOptions& options() const { return options_; }

 private:
  // Token embeddings of `table` plus positions from `offset`, or at
  // `positions` (i32 [B*T], each token's in its document) where given: [B, T, d].
  Tensor embed(nn::Embedding& table, const Tensor& ids, int64_t offset, nn::PositionEncoding& pos,
               const nn::Context& ctx, const Tensor* positions = nullptr);
  // The encoder over src [B, S] (padded rows with lengths, or `docs`).
  Tensor run_encoder(const Tensor& src, const Tensor& src_lengths, const nn::DocLayout* docs,
                     const nn::Context& ctx);  // [B, S, d]
  // The decoder's final hidden states [B*T, d] over `batch`'s target.
  Tensor run_decoder(const TranslationBatch& batch, const Tensor& memory, const nn::Context& ctx);
  // The layouts of a variable-length batch (reset for a padded one).
  void lay_out(const TranslationBatch& batch, const nn::Context& ctx);
  Tensor logits(const Tensor& h, const nn::Context& ctx) const;  // h [N, d] -> [N, V]

  TransformerOptions options_;
  nn::ParameterStore* store_;
  std::unique_ptr<nn::Embedding> embedding_;      // shared, or the encoder's
  std::unique_ptr<nn::Embedding> dec_embedding_;  // the decoder's when not shared
  nn::Embedding& decoder_embedding() const {
    return dec_embedding_ ? *dec_embedding_ : *embedding_;
  }
  std::unique_ptr<nn::PositionEncoding> enc_pos_, dec_pos_;
  // T5's bias of each stack (model.position t5; null otherwise), in the
  // ranges of enc_pos and dec_pos: final once the stack's layers are done.
  std::unique_ptr<nn::RelativeBias> enc_rel_, dec_rel_;
  std::unique_ptr<nn::Dropout> enc_drop_, dec_drop_;
  std::vector<std::unique_ptr<nn::EncoderLayer>> encoder_;
  std::vector<std::unique_ptr<nn::DecoderLayer>> decoder_;
  std::unique_ptr<nn::LayerNorm> enc_norm_, dec_norm_;  // pre-LN only
  // The parameters of each part, reported to Context::grad_ready by backward.
  struct Ranges {
    nn::ParamRange embedding, enc_pos, enc_norm, dec_embedding, dec_pos, dec_norm;
    std::vector<nn::ParamRange> encoder, decoder;
  } ranges_;

  // A variable-length batch's documents (source and target sides), and
  // their tokens' positions on the device.
  std::optional<nn::DocLayout> src_docs_, tgt_docs_;
  Tensor src_positions_, tgt_positions_;  // i32 [S], [T]
  // Saved by forward_loss for backward.
  TranslationBatch batch_;
  Tensor memory_, dec_out_, lse_;  // [B, S, d], [B*T, d], f32 [B*T]
  float smoothing_ = 0;
  nn::Context ctx_;
};

}  // namespace rotor::models
