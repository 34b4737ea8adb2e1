// The decoder-only causal Transformer language model of task lm (GPT-style;
// fairseq's transformer_lm): token embedding (times sqrt(d) with
// scale_embeddings) plus positions through nn::PositionEncoding -> dropout
// -> num_layers causal self-attention layers (nn::EncoderLayer with the
// causal mask; RoPE inside attention when the encoding rotates q and k) ->
// a final LayerNorm (pre-LN) -> the output projection, tied to the token
// embedding (share_embeddings) or its own matrix. No biases in the
// projection. fairseq's init: embeddings N(0, d^-1/2) with the pad row zero,
// Xavier-uniform layers.
//
// Parameter names (Hugging Face BART's decoder-side spelling):
//   model.embed_tokens.weight                    [V, d]
//   model.embed_positions.weight                 [max_positions, d]  (learned only)
//   model.layers.{i}.self_attn.{q,k,v,out}_proj.{weight,bias}
//   model.layers.{i}.{self_attn_layer_norm,final_layer_norm}.{weight,bias}
//   model.layers.{i}.{fc1,fc2}.{weight,bias}
//   model.layer_norm.{weight,bias}               (pre-LN only)
//   lm_head.weight                               [V, d]  (without share_embeddings)
//
// Position t of the output depends on the tokens 0..t only: the loss of a
// block of inputs x_0..x_{T-1} is the cross-entropy of targets x_1..x_T.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "nn/layers.h"
#include "nn/transformer_layers.h"

namespace rotor::models {

struct DecoderLmOptions {
  int64_t vocab_size = 0;
  int pad_id = 0;
  int64_t num_layers = 6;
  nn::LayerOptions layer;  // post_norm false: pre-LN with a final LayerNorm
  nn::PositionKind position = nn::PositionKind::Rope;
  int64_t max_positions = 1024;
  bool scale_embeddings = true;
  bool share_embeddings = true;  // the output projection is the token embedding
};

// Blocks of the token stream, right-padded with pad_id (tensors on the
// model's device).
struct LmBatch {
  Tensor input_ids;    // i32 [B, T]
  Tensor targets;      // i32 [B, T]: the next token of each input, pad_id where none
  int64_t tokens = 0;  // non-pad targets: the loss's normalizer
  // Packed documents (data.packing documents; empty otherwise): each
  // token's document index in its row (host [B*T], -1 for padding), and its
  // position in its document, i32 [B, T]. Attention stays within a document
  // (nn::DocLayout) and a position table reads these positions.
  std::vector<int32_t> segments;
  Tensor positions;  // i32 [B, T]
  LmBatch to(Device device) const;
};

struct LmSums {
  double loss = 0;           // -log p(target), summed over the targets
  int64_t tokens = 0;        // targets scored
  int64_t correct = 0;       // targets that are the argmax of their row
  bool has_correct = false;  // counted when !ctx.training (ops::count_top1_hits)
};

// Incremental decoding (DecoderLM::prefill, decode_step): per layer the
// cache of rotated keys and values, [B, H, max_length, D]; per row the tokens
// cached so far, which is also the position of its next token (every row's
// positions start at 0).
struct LmDecodeState {
  std::vector<nn::MultiHeadAttention::Cache> layers;
  std::vector<int64_t> lengths;
  int64_t max_length = 0;  // cache slots per row
};

class DecoderLM {
 public:
  DecoderLM(const DecoderLmOptions& options, nn::ParameterStore& store);

  // Forward and loss; keeps what backward needs. Returns host sums.
  LmSums forward_loss(const LmBatch& batch, const nn::Context& ctx);
  // Backward of forward_loss: d(loss_sum * loss_scale); accumulates into the
  // store's gradients and reports each part to ctx.grad_ready.
  void backward(float loss_scale);

  // Inference: ids i32 [B, T] -> logits f32/ctx.dtype [B, T, V]. Overwrites
  // what the layers saved for a backward.
  Tensor forward_logits(const Tensor& input_ids, const nn::Context& ctx);
  // The same for a batch, packed documents included (LmBatch::segments).
  Tensor forward_logits(const LmBatch& batch, const nn::Context& ctx);

  // Incremental decoding through the key/value cache; ids on the model's
  // device, logits f32/ctx.dtype [B, V], nothing kept for a backward.
  // prefill: prompts ids i32 [B, T] right padded, row b's first lengths[b]
  // (1..T) real, into a new state of max_length >= T cache slots per row ->
  // the logits at each row's last prompt token (of its next token).
  Tensor prefill(LmDecodeState& state, const Tensor& ids, const std::vector<int64_t>& lengths,
                 int64_t max_length, const nn::Context& ctx);
  // tokens i32 [B]: each row's next token, at position state.lengths[b] (below
  // max_length, and below max_positions with a position table) -> the logits
  // of the token after it; the lengths advance by one.
  Tensor decode_step(LmDecodeState& state, const Tensor& tokens, const nn::Context& ctx);
  // Keeps rows `index` (i32 [B'], host values `rows`) of the state's caches.
  void keep_rows(LmDecodeState& state, const std::vector<int32_t>& rows,
                 const nn::Context& ctx) const;

  const DecoderLmOptions& options() const { return options_; }

 private:
  // [B*T, d], final norm applied; with segments (LmBatch) packed documents.
  Tensor hidden(const Tensor& ids, const nn::Context& ctx,
                const std::vector<int32_t>* segments = nullptr, const Tensor& positions = Tensor());
  Tensor logits(const Tensor& h, const nn::Context& ctx) const;  // [N, d] -> [N, V]
  nn::Parameter* output_table() const;

  DecoderLmOptions options_;
  nn::ParameterStore* store_;
  std::unique_ptr<nn::Embedding> embedding_;
  std::unique_ptr<nn::PositionEncoding> position_;
  std::unique_ptr<nn::Dropout> drop_;
  std::unique_ptr<nn::RelativeBias> rel_;  // T5's bias (model.position t5), in the position range
  std::vector<std::unique_ptr<nn::EncoderLayer>> layers_;
  std::unique_ptr<nn::LayerNorm> norm_;  // pre-LN only
  nn::Parameter* head_ = nullptr;        // lm_head.weight without share_embeddings
  struct Ranges {
    nn::ParamRange embedding, position, norm, head;
    std::vector<nn::ParamRange> layers;
  } ranges_;

  // Saved by forward_loss for backward.
  LmBatch batch_;
  Tensor out_, lse_;                   // [B*T, d], f32 [B*T]
  std::optional<nn::DocLayout> docs_;  // the forward's packed documents
  int64_t B_ = 0, T_ = 0;
  nn::Context ctx_;
};

}  // namespace rotor::models
