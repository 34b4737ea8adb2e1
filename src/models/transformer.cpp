#include "models/transformer.h"

#include <cmath>

#include "nn/position.h"
#include "ops/cross_entropy.h"
#include "ops/decode.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/reduce.h"
#include "ops/softmax.h"

namespace rotor::models {

using nn::Context;
using nn::Init;

nn::EncoderLayerNames bart_encoder_layer_names(const std::string& p) {
  return {{p + ".self_attn.q_proj", p + ".self_attn.k_proj", p + ".self_attn.v_proj",
           p + ".self_attn.out_proj"},
          p + ".self_attn_layer_norm",
          p + ".fc1",
          p + ".fc2",
          p + ".final_layer_norm"};
}

EncoderDecoder::EncoderDecoder(const TransformerOptions& c, nn::ParameterStore& store)
    : options_(c), store_(&store) {
  const int64_t d = c.layer.d_model;
  ROTOR_CHECK(c.vocab_size > 0, "vocabulary size must be positive");
  ROTOR_CHECK(!c.position->bert_encoder_only,
              "model.position {} is built for the BERT encoder, not an encoder-decoder",
              c.position.name());
  // Each part's parameters, from the registration marks around it.
  size_t mark = nn::ParamRange::mark(store);
  auto take = [&](nn::ParamRange& r) {
    r = {mark, nn::ParamRange::mark(store)};
    mark = r.last;
  };
  // fairseq: embeddings N(0, d^-1/2) with the pad row zero.
  auto make_embedding = [&](const std::string& name) {
    auto e = std::make_unique<nn::Embedding>(store, name, c.vocab_size, d, c.pad_id,
                                             Init::normal(std::pow(static_cast<double>(d), -0.5)));
    e->set_scale(c.scale_embeddings ? std::sqrt(static_cast<float>(d)) : 1.0f);
    return e;
  };
  embedding_ = make_embedding(c.share_embeddings ? "model.shared.weight"
                                                 : "model.encoder.embed_tokens.weight");
  take(ranges_.embedding);
  nn::LayerOptions lc = c.layer;
  lc.rope = c.position->rotates_qk;
  lc.alibi = c.position->alibi;
  lc.xl = c.position->xl_terms;
  const double pos_std = std::pow(static_cast<double>(d), -0.5);
  enc_pos_ = std::make_unique<nn::PositionEncoding>(store, "model.encoder.embed_positions.weight",
                                                    c.position, c.max_positions, d, pos_std);
  enc_drop_ = std::make_unique<nn::Dropout>(store, lc.dropout);
  if (c.position->relative_bias) {
    enc_rel_ =
        std::make_unique<nn::RelativeBias>(store, "model.encoder.relative_attention_bias.weight",
                                           nn::relative_bias_options(lc, true), pos_std);
    lc.relative_bias = enc_rel_.get();
  }
  take(ranges_.enc_pos);
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    encoder_.push_back(std::make_unique<nn::EncoderLayer>(
        store, bart_encoder_layer_names("model.encoder.layers." + std::to_string(i)), lc));
    take(ranges_.encoder.emplace_back());
  }
  if (!lc.post_norm)
    enc_norm_ = std::make_unique<nn::LayerNorm>(store, "model.encoder.layer_norm", d,
                                                lc.layer_norm_eps, lc.rms_norm);
  take(ranges_.enc_norm);
  if (!c.share_embeddings) dec_embedding_ = make_embedding("model.decoder.embed_tokens.weight");
  take(ranges_.dec_embedding);
  dec_pos_ = std::make_unique<nn::PositionEncoding>(store, "model.decoder.embed_positions.weight",
                                                    c.position, c.max_positions, d, pos_std);
  dec_drop_ = std::make_unique<nn::Dropout>(store, lc.dropout);
  if (c.position->relative_bias) {
    dec_rel_ =
        std::make_unique<nn::RelativeBias>(store, "model.decoder.relative_attention_bias.weight",
                                           nn::relative_bias_options(lc, false), pos_std);
    lc.relative_bias = dec_rel_.get();
  }
  take(ranges_.dec_pos);
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    decoder_.push_back(
        std::make_unique<nn::DecoderLayer>(store, "model.decoder.layers." + std::to_string(i), lc));
    take(ranges_.decoder.emplace_back());
  }
  if (!lc.post_norm)
    dec_norm_ = std::make_unique<nn::LayerNorm>(store, "model.decoder.layer_norm", d,
                                                lc.layer_norm_eps, lc.rms_norm);
  take(ranges_.dec_norm);
}

Tensor EncoderDecoder::embed(nn::Embedding& table, const Tensor& ids, int64_t offset,
                             nn::PositionEncoding& pos, const Context& ctx,
                             const Tensor* positions) {
  const int64_t B = ids.size(0), T = ids.size(1), d = options_.layer.d_model;
  Tensor x = table.apply(ids, ctx).view({B, T, d});  // [B, T, d]
  if (positions)
    pos.add_at(x, *positions, ctx);
  else
    pos.add(x, offset, ctx);
  return x;
}

void EncoderDecoder::lay_out(const TranslationBatch& batch, const Context& ctx) {
  src_docs_.reset();
  tgt_docs_.reset();
  src_positions_ = tgt_positions_ = Tensor();
  if (!batch.variable_length()) return;
  const int64_t S = batch.src.size(1), T = batch.tgt_in.size(1);
  ROTOR_CHECK(batch.src.size(0) == 1 && batch.tgt_in.size(0) == 1,
              "a variable-length translation batch is one row per side, got [{}, {}] and [{}, {}]",
              batch.src.size(0), S, batch.tgt_in.size(0), T);
  src_docs_ = nn::DocLayout::from_segments(batch.src_documents, 1, S, ctx.device);
  tgt_docs_ = nn::DocLayout::from_segments(batch.tgt_documents, 1, T, ctx.device);
  ROTOR_CHECK(src_docs_->N == tgt_docs_->N,
              "a variable-length translation batch has {} source and {} target sentences",
              src_docs_->N, tgt_docs_->N);
  src_positions_ = Tensor::from_ints(src_docs_->positions, {S}).to(ctx.device);
  tgt_positions_ = Tensor::from_ints(tgt_docs_->positions, {T}).to(ctx.device);
}

Tensor EncoderDecoder::run_encoder(const Tensor& src, const Tensor& src_lengths,
                                   const nn::DocLayout* docs, const Context& ctx) {
  // [B, S, d]
  Tensor x = embed(*embedding_, src, 0, *enc_pos_, ctx, docs ? &src_positions_ : nullptr);
  x = enc_drop_->forward(x, ctx);
  if (enc_rel_) enc_rel_->prepare(ctx);
  const Tensor lengths = docs ? Tensor() : src_lengths;  // i32 [B]
  for (auto& layer : encoder_) x = layer->forward(x, lengths, ctx, nullptr, docs);
  if (enc_norm_) {
    const int64_t B = x.size(0), S = x.size(1), d = options_.layer.d_model;
    x = enc_norm_->forward(x.view({B * S, d}), ctx).view({B, S, d});
  }
  return x;
}

Tensor EncoderDecoder::run_decoder(const TranslationBatch& batch, const Tensor& memory,
                                   const Context& ctx) {
  const int64_t B = batch.tgt_in.size(0), T = batch.tgt_in.size(1), d = options_.layer.d_model;
  const nn::DocLayout* docs = tgt_docs_ ? &*tgt_docs_ : nullptr;
  const nn::DocLayout* memory_docs = src_docs_ ? &*src_docs_ : nullptr;
  // [B, T, d]
  Tensor y =
      embed(decoder_embedding(), batch.tgt_in, 0, *dec_pos_, ctx, docs ? &tgt_positions_ : nullptr);
  y = dec_drop_->forward(y, ctx);
  if (dec_rel_) dec_rel_->prepare(ctx);
  for (auto& layer : decoder_)
    y = layer->forward(y, memory, docs ? Tensor() : batch.src_lengths, ctx, docs, memory_docs);
  Tensor h = y.view({B * T, d});  // [B*T, d]
  if (dec_norm_) h = dec_norm_->forward(h, ctx);
  return h;
}

Tensor EncoderDecoder::logits(const Tensor& h, const Context& ctx) const {
  Tensor out = ctx.empty({h.size(0), options_.vocab_size});  // [N, V]
  ops::GemmOptions o;
  o.trans_b = true;
  // The output projection is tied to the decoder's input embedding.
  ops::gemm(h, decoder_embedding().table()->value_in(ctx.dtype), out, o);
  return out;
}

Tensor EncoderDecoder::encode(const Tensor& src, const Tensor& src_lengths, const Context& ctx) {
  return run_encoder(src, src_lengths, nullptr, ctx);
}

LossSums EncoderDecoder::forward_loss(const TranslationBatch& batch, float label_smoothing,
                                      const Context& ctx) {
  batch_ = batch;
  ctx_ = ctx;
  smoothing_ = label_smoothing;
  const int64_t B = batch.tgt_in.size(0), T = batch.tgt_in.size(1);
  lay_out(batch, ctx);
  memory_ = run_encoder(batch.src, batch.src_lengths, src_docs_ ? &*src_docs_ : nullptr, ctx);
  dec_out_ = run_decoder(batch, memory_, ctx);                   // [B*T, d]
  Tensor lg = logits(dec_out_, ctx);                             // [B*T, V]
  Tensor loss = Tensor::empty({B * T}, DType::F32, ctx.device);  // f32 [B*T]
  Tensor nll = Tensor::empty({B * T}, DType::F32, ctx.device);   // f32 [B*T]
  lse_ = Tensor::empty({B * T}, DType::F32, ctx.device);
  Tensor targets = batch.tgt_out.view({B * T});  // i32 [B*T]
  ops::cross_entropy_forward(lg, targets, label_smoothing, options_.pad_id, loss, nll, lse_);
  LossSums sums;
  sums.loss = ops::sum(loss);
  sums.nll = ops::sum(nll);
  sums.tokens = batch.tgt_tokens;
  return sums;
}

Tensor EncoderDecoder::forward_logits(const TranslationBatch& batch, const Context& ctx) {
  lay_out(batch, ctx);
  // [B, S, d]
  Tensor memory = run_encoder(batch.src, batch.src_lengths, src_docs_ ? &*src_docs_ : nullptr, ctx);
  Tensor h = run_decoder(batch, memory, ctx);  // [B*T, d]
  return logits(h, ctx);
}

void EncoderDecoder::backward(float loss_scale) {
  const Context& ctx = ctx_;
  // Each part is reported to ctx.grad_ready right after its backward (in
  // descending offsets: the layout is construction order); an embedding
  // matrix only after its last use (the decoder's serves the output
  // projection too; a shared one serves all three).
  const auto ready = [&](const nn::ParamRange& r) { ctx.report_grads_ready(*store_, r); };
  const int64_t B = batch_.tgt_in.size(0), T = batch_.tgt_in.size(1), d = options_.layer.d_model;
  const int64_t S = batch_.src.size(1);
  // Recompute the logits rather than keep [N, V] alive between the passes.
  Tensor lg = logits(dec_out_, ctx);       // [B*T, V]
  Tensor dlogits = ctx.empty(lg.shape());  // [B*T, V]
  ops::cross_entropy_backward(lg, batch_.tgt_out.view({B * T}), lse_, smoothing_, options_.pad_id,
                              loss_scale, dlogits);
  lg = Tensor();
  // logits = h E^T: dE += dlogits^T h, dh = dlogits E.
  nn::Parameter* table = decoder_embedding().table();
  ops::GemmOptions acc;
  acc.trans_a = true;
  acc.beta = 1.0f;
  ops::gemm(dlogits, dec_out_, table->grad, acc);
  Tensor dh = ctx.empty({B * T, d});  // [B*T, d]
  ops::gemm(dlogits, table->value_in(dlogits.dtype()), dh, {});
  dlogits = Tensor();
  if (dec_norm_) dh = dec_norm_->backward(dh);
  ready(ranges_.dec_norm);
  Tensor dy = dh.view({B, T, d});          // [B, T, d]
  Tensor d_memory = ctx.zeros({B, S, d});  // [B, S, d]
  for (size_t i = decoder_.size(); i-- > 0;) {
    dy = decoder_[i]->backward(dy, d_memory);
    ready(ranges_.decoder[i]);
  }
  if (dec_rel_) dec_rel_->backward();
  dy = dec_drop_->backward(dy);
  if (tgt_docs_)
    dec_pos_->backward_at(dy, tgt_positions_);
  else
    dec_pos_->backward(dy, 0);
  ready(ranges_.dec_pos);
  decoder_embedding().backward(batch_.tgt_in, dy.view({B * T, d}));
  ready(ranges_.dec_embedding);  // empty when shared: reported with the encoder's
  // [B, S, d]
  Tensor dx = d_memory;
  if (enc_norm_) dx = enc_norm_->backward(dx.view({B * S, d})).view({B, S, d});
  ready(ranges_.enc_norm);
  for (size_t i = encoder_.size(); i-- > 0;) {
    dx = encoder_[i]->backward(dx);
    ready(ranges_.encoder[i]);
  }
  if (enc_rel_) enc_rel_->backward();
  dx = enc_drop_->backward(dx);
  if (src_docs_)
    enc_pos_->backward_at(dx, src_positions_);
  else
    enc_pos_->backward(dx, 0);
  ready(ranges_.enc_pos);
  embedding_->backward(batch_.src, dx.view({B * S, d}));
  ready(ranges_.embedding);
  memory_ = dec_out_ = lse_ = Tensor();
  batch_ = TranslationBatch{};
  lay_out(batch_, ctx);       // drops a variable-length batch's layouts
  ctx_.grad_ready = nullptr;  // the listener lives only for this backward
}

EncoderDecoder::DecodeState EncoderDecoder::start_decoding(const Tensor& memory,
                                                           const Tensor& memory_lengths,
                                                           int64_t max_length) {
  DecodeState s;
  s.memory = memory;
  s.memory_lengths = memory_lengths;
  s.layers.resize(decoder_.size());
  s.max_length = max_length;
  return s;
}

Tensor EncoderDecoder::decode_step(DecodeState& state, const Tensor& tokens, const Context& ctx) {
  const int64_t B = tokens.size(0), d = options_.layer.d_model;
  ROTOR_CHECK(state.position < state.max_length, "decoding past max length {}", state.max_length);
  // [B, 1, d]
  Tensor y = embed(decoder_embedding(), tokens.view({B, 1}), state.position, *dec_pos_, ctx);
  if (dec_rel_) dec_rel_->prepare(ctx);
  for (size_t i = 0; i < decoder_.size(); ++i)
    y = decoder_[i]->step(y, state.memory, state.memory_lengths, state.layers[i], state.position,
                          state.max_length, ctx);
  Tensor h = y.view({B, d});  // [B, d]
  if (dec_norm_) h = dec_norm_->apply(h, ctx);
  Tensor lg = logits(h, ctx);  // [B, V]
  // log_softmax = logits - logsumexp, via softmax for the max-shifted sums.
  Tensor probs = Tensor::empty(lg.shape(), DType::F32, ctx.device);  // f32 [B, V]
  ops::softmax_forward(lg, probs);
  std::vector<float> p = probs.to_floats();
  for (auto& v : p) v = std::log(std::max(v, 1e-30f));
  state.position += 1;
  return Tensor::from_floats(p, {B, options_.vocab_size});
}

void EncoderDecoder::reorder(DecodeState& state, const Tensor& index) const {
  auto gather = [&](Tensor& t) {
    if (!t.defined()) return;
    Shape s = t.shape();
    s[0] = index.size(0);
    Tensor out = Tensor::empty(s, t.dtype(), t.device());  // [B', t's other dims]
    ops::index_select(t, index, out);
    t = out;
  };
  gather(state.memory);
  gather(state.memory_lengths);
  for (auto& l : state.layers) {
    gather(l.self.k);
    gather(l.self.v);
    gather(l.cross.k);
    gather(l.cross.v);
  }
}

}  // namespace rotor::models
