#include "models/bert.h"

#include <algorithm>

#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/reduce.h"

namespace rotor::models {

using nn::Context;
using nn::Init;

nn::EncoderLayerNames bert_layer_names(const std::string& p) {
  return {{p + ".attention.self.query", p + ".attention.self.key", p + ".attention.self.value",
           p + ".attention.output.dense"},
          p + ".attention.output.LayerNorm",
          p + ".intermediate.dense",
          p + ".output.dense",
          p + ".output.LayerNorm"};
}

MlmBatch MlmBatch::to(Device device) const {
  MlmBatch b = *this;
  auto move = [&](Tensor& t) {
    if (t.defined()) t = t.to(device);
  };
  move(b.input_ids);
  move(b.token_type_ids);
  move(b.lengths);
  move(b.age_ids);
  move(b.position_ids);
  move(b.masked_positions);
  move(b.masked_targets);
  return b;
}

BertEncoder::BertEncoder(const BertOptions& c, nn::ParameterStore& store)
    : options_(c), store_(&store) {
  ROTOR_CHECK(c.vocab_size > 0, "vocabulary size must be positive");
  const int64_t d = c.layer.d_model;
  const std::string p = c.prefix();
  size_t mark = nn::ParamRange::mark(store);  // the parts' parameters, for grad_ready
  auto take = [&](nn::ParamRange& r) {
    r = {mark, nn::ParamRange::mark(store)};
    mark = r.last;
  };
  // Hugging Face order: word, position, token type, LayerNorm.
  word_ = std::make_unique<nn::Embedding>(store, p + ".embeddings.word_embeddings.weight",
                                          c.vocab_size, d, c.pad_id, Init::normal(c.init_std));
  word_->set_scale(1.0f);  // BERT does not scale embeddings by sqrt(d)
  position_ =
      std::make_unique<nn::PositionEncoding>(store, p + ".embeddings.position_embeddings.weight",
                                             c.position, c.max_positions, d, c.init_std);
  if (c.type_vocab_size > 0)
    token_type_ =
        std::make_unique<nn::Embedding>(store, p + ".embeddings.token_type_embeddings.weight",
                                        c.type_vocab_size, d, -1, Init::normal(c.init_std));
  if (c.age_vocab_size > 0 && c.age_time2vec > 0)
    age_t2v_ = std::make_unique<nn::Time2Vec>(store, p + ".embeddings.age_time2vec", c.age_time2vec,
                                              c.age_vocab_size, d, c.init_std);
  else if (c.age_vocab_size > 0)
    age_ = std::make_unique<nn::Embedding>(store, p + ".embeddings.age_embeddings.weight",
                                           c.age_vocab_size, d, -1, Init::normal(c.init_std));
  emb_norm_ = std::make_unique<nn::LayerNorm>(store, p + ".embeddings.LayerNorm", d,
                                              c.layer.layer_norm_eps, c.layer.rms_norm);
  emb_drop_ = std::make_unique<nn::Dropout>(store, c.layer.dropout);
  nn::LayerOptions lc = c.layer;
  lc.rope = c.position->rotates_qk;
  lc.alibi = c.position->alibi;
  lc.xl = c.position->xl_terms;
  lc.normal_init_std = c.init_std;
  if (c.position->disentangled) {
    deberta_ = std::make_unique<nn::DebertaRelative>(store, p + ".encoder", c.deberta, d,
                                                     lc.layer_norm_eps, c.init_std);
    lc.deberta = deberta_.get();
  }
  if (c.position->untied_correlation) {
    tupe_ = std::make_unique<nn::TupeBias>(store, p + ".encoder.tupe", c.max_positions, d,
                                           lc.n_heads, c.init_std);
    lc.tupe = tupe_.get();
  }
  if (c.position->relative_bias || (c.position->untied_correlation && c.tupe_relative)) {
    rel_ = std::make_unique<nn::RelativeBias>(store, p + ".encoder.relative_attention_bias.weight",
                                              nn::relative_bias_options(lc, true), c.init_std);
    lc.relative_bias = rel_.get();
  }
  take(embeddings_range_);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    layers_.push_back(std::make_unique<nn::EncoderLayer>(
        store, bert_layer_names(p + ".encoder.layer." + std::to_string(i)), lc));
    take(layer_ranges_.emplace_back());
  }
}

Tensor BertEncoder::forward(const Tensor& ids, const Tensor& types, const Tensor& lengths,
                            const Context& ctx) {
  return forward(EncoderInputs{ids, types, lengths, Tensor(), Tensor(), {}}, ctx);
}

Tensor BertEncoder::forward(const EncoderInputs& in, const Context& ctx) {
  const Tensor& ids = in.input_ids;  // i32 [B, T]
  ROTOR_CHECK(ids.dim() == 2 && ids.dtype() == DType::I32,
              "BERT: input ids must be i32 [B, T], got {}", ids.str());
  B_ = ids.size(0);
  T_ = ids.size(1);
  const int64_t N = B_ * T_, d = options_.layer.d_model;
  ids_ = ids.view({N});
  Tensor x = word_->forward(ids_, ctx);  // [N, d]
  types_ = ages_ = positions_ = Tensor();
  host_positions_.clear();
  if (token_type_) {
    types_ = in.token_type_ids.defined() ? in.token_type_ids.view({N})
                                         : Tensor::zeros({N}, DType::I32, ctx.device);
    Tensor t = token_type_->forward(types_, ctx);  // [N, d]
    ops::add(x, t, x);
  }
  if (age_ || age_t2v_) {
    if (!in.age_ids.defined())
      ROTOR_FAIL("model.age_vocab_size {} needs age ids: EHR data (data.format ehr)",
                 options_.age_vocab_size);
    ages_ = in.age_ids.view({N});
    Tensor a = age_ ? age_->forward(ages_, ctx) : age_t2v_->forward(ages_, ctx);  // [N, d]
    ops::add(x, a, x);
  }
  Tensor x3 = x.view({B_, T_, d});  // [B, T, d]
  docs_.reset();
  const bool packed = !in.documents.empty();
  if (packed) {
    ROTOR_CHECK(!tupe_, "model.position tupe does not take packed documents");
    ROTOR_CHECK(static_cast<int64_t>(in.documents.size()) == N,
                "BERT: {} document indices for a batch [{}, {}]", in.documents.size(), B_, T_);
    docs_ = nn::DocLayout::from_segments(in.documents, B_, T_, ctx.device);
  }
  if (options_.visit_positions) {
    if (!in.position_ids.defined())
      ROTOR_FAIL("model.position_source visit needs visit positions: EHR data (data.format ehr)");
    positions_ = in.position_ids.view({N});
    position_->add_at(x3, positions_, ctx);
    // Visit positions rotate q and k in the head split (each document's
    // rows follow them there, nn::DocLayout).
    if (options_.position->rotates_qk) host_positions_ = positions_.to_ints();
  } else if (packed) {  // each token's position in its document, from 0
    positions_ = Tensor::from_ints(docs_->positions, {N}).to(ctx.device);
    position_->add_at(x3, positions_, ctx);
  } else {
    position_->add(x3, 0, ctx);
  }
  x = emb_norm_->forward(x, ctx);
  x = emb_drop_->forward(x, ctx).view({B_, T_, d});
  const std::vector<int32_t>* rope_positions = host_positions_.empty() ? nullptr : &host_positions_;
  if (rel_) rel_->prepare(ctx);
  if (tupe_) tupe_->prepare(B_, T_, ctx);
  if (deberta_) deberta_->prepare(docs_ ? docs_->L : T_, ctx);
  const nn::DocLayout* docs = docs_ ? &*docs_ : nullptr;
  // The documents carry the padding.
  const Tensor lengths = docs ? Tensor() : in.lengths;  // i32 [B]
  for (auto& layer : layers_) x = layer->forward(x, lengths, ctx, rope_positions, docs);
  return x;  // [B, T, d]
}

void BertEncoder::backward(const Tensor& dh, const Context& ctx) {
  const int64_t d = options_.layer.d_model, N = B_ * T_;
  Tensor dx = dh.view({B_, T_, d});  // [B, T, d]
  for (size_t i = layers_.size(); i-- > 0;) {
    dx = layers_[i]->backward(dx);
    ctx.report_grads_ready(*store_, layer_ranges_[i]);
  }
  if (rel_) rel_->backward();
  if (tupe_) tupe_->backward();
  if (deberta_) deberta_->backward();
  Tensor g = emb_drop_->backward(dx.view({N, d}));  // [N, d]
  g = emb_norm_->backward(g);                       // [N, d]
  if (positions_.defined())
    position_->backward_at(g, positions_);
  else
    position_->backward(g.view({B_, T_, d}), 0);
  word_->backward(ids_, g);
  if (token_type_) token_type_->backward(types_, g);
  if (age_) age_->backward(ages_, g);
  if (age_t2v_) age_t2v_->backward(g);
  ctx.report_grads_ready(*store_, embeddings_range_);
  ids_ = types_ = ages_ = positions_ = Tensor();
  docs_.reset();
}

BertForMaskedLM::BertForMaskedLM(const BertOptions& c, nn::ParameterStore& store)
    : options_(c), store_(&store), encoder_(c, store) {
  const int64_t d = c.layer.d_model;
  const size_t mark = nn::ParamRange::mark(store);
  transform_ = std::make_unique<nn::Linear>(store, "cls.predictions.transform.dense", d, d, true,
                                            Init::normal(c.init_std), c.layer.activation);
  transform_norm_ = std::make_unique<nn::LayerNorm>(store, "cls.predictions.transform.LayerNorm", d,
                                                    c.layer.layer_norm_eps, c.layer.rms_norm);
  decoder_bias_ = store.add("cls.predictions.bias", {c.vocab_size}, Init::zeros(), true);
  head_range_ = {mark, nn::ParamRange::mark(store)};
}

Tensor BertForMaskedLM::encode(const Tensor& ids, const Tensor& types, const Tensor& lengths,
                               const Context& ctx) {
  return encode(EncoderInputs{ids, types, lengths, Tensor(), Tensor(), {}}, ctx);
}

Tensor BertForMaskedLM::encode(const EncoderInputs& in, const Context& ctx) {
  B_ = in.input_ids.size(0);
  T_ = in.input_ids.size(1);
  return encoder_.forward(in, ctx);
}

Tensor BertForMaskedLM::head_logits(const Tensor& h, const Context& ctx) const {
  Tensor out = ctx.empty({h.size(0), options_.vocab_size});  // [M, V]
  ops::GemmOptions o;
  o.trans_b = true;
  o.bias = decoder_bias_->value_in(ctx.dtype);
  ops::gemm(h, encoder_.word().table()->value_in(ctx.dtype), out,
            o);  // decoder tied to the word embedding
  return out;
}

MlmSums BertForMaskedLM::forward_loss(const MlmBatch& batch, const Context& ctx) {
  batch_ = batch;
  ctx_ = ctx;
  const int64_t d = options_.layer.d_model;
  // [B, T, d]
  Tensor h = encode(EncoderInputs{batch.input_ids, batch.token_type_ids, batch.lengths,
                                  batch.age_ids, batch.position_ids, batch.documents},
                    ctx);
  const int64_t N = B_ * T_;
  const int64_t M = batch.masked_positions.defined() ? batch.masked_positions.numel() : 0;
  ROTOR_CHECK(M == batch.masked_tokens, "MlmBatch: masked_tokens {} but {} masked positions",
              batch.masked_tokens, M);
  MlmSums sums;
  sums.has_correct = true;
  if (M == 0) {
    head_out_ = lse_ = Tensor();
    return sums;
  }
  // Gather the masked rows: an embedding lookup with the hidden states as the table.
  Tensor hm = ctx.empty({M, d});  // [M, d]
  ops::embedding_forward(batch.masked_positions, h.view({N, d}), 1.0f, hm);
  hm = transform_->forward(hm, ctx);
  head_out_ = transform_norm_->forward(hm, ctx);             // [M, d]
  Tensor lg = head_logits(head_out_, ctx);                   // [M, V]
  Tensor loss = Tensor::empty({M}, DType::F32, ctx.device);  // f32 [M]
  Tensor nll = Tensor::empty({M}, DType::F32, ctx.device);   // f32 [M]
  lse_ = Tensor::empty({M}, DType::F32, ctx.device);
  ops::cross_entropy_forward(lg, batch.masked_targets, 0.0f, -1, loss, nll, lse_);
  sums.loss = ops::sum(nll);
  sums.tokens = M;
  // On the logits' device: only the [M] flags reach the host.
  sums.correct = ops::count_top1_hits(lg, batch.masked_targets, -1);
  return sums;
}

void BertForMaskedLM::backward(float loss_scale) {
  const Context& ctx = ctx_;
  // Each part is reported to ctx.grad_ready right after its backward, in
  // descending offsets (the head, then the encoder's layers from the last and
  // its embeddings); the word embedding, tied to the decoder, with the
  // embeddings at the end. Reported whether or not the batch masks any token,
  // so that every rank reports the same ranges in the same order.
  const int64_t d = options_.layer.d_model, N = B_ * T_;
  Tensor dh = ctx.zeros({N, d});  // [N, d]
  if (head_out_.defined()) {
    const int64_t M = head_out_.size(0);
    // Recompute the logits rather than keep [M, V] alive between the passes.
    Tensor lg = head_logits(head_out_, ctx);  // [M, V]
    Tensor dlogits = ctx.empty(lg.shape());   // [M, V]
    ops::cross_entropy_backward(lg, batch_.masked_targets, lse_, 0.0f, -1, loss_scale, dlogits);
    lg = Tensor();
    // logits = h E^T + b: dE += dlogits^T h, db += colsum(dlogits), dh = dlogits E.
    nn::Parameter* table = encoder_.word().table();
    ops::GemmOptions acc;
    acc.trans_a = true;
    acc.beta = 1.0f;
    ops::gemm(dlogits, head_out_, table->grad, acc);
    ops::sum_rows(dlogits, decoder_bias_->grad, true);
    Tensor dhm = ctx.empty({M, d});  // [M, d]
    ops::gemm(dlogits, table->value_in(dlogits.dtype()), dhm, {});
    dlogits = Tensor();
    dhm = transform_norm_->backward(dhm);
    dhm = transform_->backward(dhm);
    // Scatter back to the masked rows (each position appears once).
    ops::embedding_backward(batch_.masked_positions, dhm, 1.0f, dh, -1);
  }
  ctx.report_grads_ready(*store_, head_range_);
  encoder_.backward(dh.view({B_, T_, d}), ctx);
  head_out_ = lse_ = Tensor();
  batch_ = MlmBatch{};
  ctx_.grad_ready = nullptr;  // the listener lives only for this backward
}

Tensor BertForMaskedLM::forward_logits(const Tensor& input_ids, const Tensor& token_type_ids,
                                       const Tensor& lengths, const Context& ctx) {
  return forward_logits(EncoderInputs{input_ids, token_type_ids, lengths, Tensor(), Tensor(), {}},
                        ctx);
}

Tensor BertForMaskedLM::forward_logits(const EncoderInputs& in, const Context& ctx) {
  Tensor h = encode(in, ctx);  // [B, T, d]
  const int64_t N = B_ * T_, d = options_.layer.d_model;
  Tensor t = transform_->apply(h.view({N, d}), ctx);  // [N, d]
  t = transform_norm_->apply(t, ctx);
  return head_logits(t, ctx).view({B_, T_, options_.vocab_size});
}

}  // namespace rotor::models
