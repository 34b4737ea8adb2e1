#include "models/decoder_lm.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/transformer.h"  // bart_encoder_layer_names
#include "nn/position.h"
#include "ops/cross_entropy.h"
#include "ops/decode.h"
#include "ops/gemm.h"
#include "ops/reduce.h"

namespace rotor::models {

using nn::Context;
using nn::Init;

LmBatch LmBatch::to(Device device) const {
  LmBatch b = *this;
  b.input_ids = input_ids.to(device);
  b.targets = targets.to(device);
  if (positions.defined()) b.positions = positions.to(device);
  return b;
}

DecoderLM::DecoderLM(const DecoderLmOptions& c, nn::ParameterStore& store)
    : options_(c), store_(&store) {
  ROTOR_CHECK(c.vocab_size > 0, "vocabulary size must be positive");
  ROTOR_CHECK(c.num_layers > 0, "a language model needs at least one layer");
  ROTOR_CHECK(!c.position->bert_encoder_only,
              "model.position {} is built for the BERT encoder, not a decoder-only LM",
              c.position.name());
  const int64_t d = c.layer.d_model;
  size_t mark = nn::ParamRange::mark(store);
  auto take = [&](nn::ParamRange& r) {
    r = {mark, nn::ParamRange::mark(store)};
    mark = r.last;
  };
  const double std = std::pow(static_cast<double>(d), -0.5);
  embedding_ = std::make_unique<nn::Embedding>(store, "model.embed_tokens.weight", c.vocab_size, d,
                                               c.pad_id, Init::normal(std));
  embedding_->set_scale(c.scale_embeddings ? std::sqrt(static_cast<float>(d)) : 1.0f);
  take(ranges_.embedding);
  position_ = std::make_unique<nn::PositionEncoding>(store, "model.embed_positions.weight",
                                                     c.position, c.max_positions, d, std);
  drop_ = std::make_unique<nn::Dropout>(store, c.layer.dropout);
  nn::LayerOptions lc = c.layer;
  lc.rope = c.position->rotates_qk;
  lc.alibi = c.position->alibi;
  lc.xl = c.position->xl_terms;
  if (c.position->relative_bias) {
    rel_ = std::make_unique<nn::RelativeBias>(store, "model.relative_attention_bias.weight",
                                              nn::relative_bias_options(lc, false), std);
    lc.relative_bias = rel_.get();
  }
  take(ranges_.position);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    layers_.push_back(std::make_unique<nn::EncoderLayer>(
        store, bart_encoder_layer_names("model.layers." + std::to_string(i)), lc, true));
    take(ranges_.layers.emplace_back());
  }
  if (!lc.post_norm)
    norm_ = std::make_unique<nn::LayerNorm>(store, "model.layer_norm", d, lc.layer_norm_eps,
                                            lc.rms_norm);
  take(ranges_.norm);
  if (!c.share_embeddings)
    head_ = store.add("lm_head.weight", {c.vocab_size, d}, Init::normal(std));
  take(ranges_.head);
}

nn::Parameter* DecoderLM::output_table() const {
  return head_ ? head_ : embedding_->table();
}

Tensor DecoderLM::hidden(const Tensor& ids, const Context& ctx,
                         const std::vector<int32_t>* segments, const Tensor& positions) {
  ROTOR_CHECK(ids.dim() == 2 && ids.dtype() == DType::I32,
              "language model: input ids must be i32 [B, T], got {}", ids.str());
  B_ = ids.size(0);
  T_ = ids.size(1);
  const int64_t d = options_.layer.d_model;
  Tensor x = embedding_->forward(ids.view({B_ * T_}), ctx).view({B_, T_, d});  // [B, T, d]
  docs_.reset();
  if (segments && !segments->empty()) {
    ROTOR_CHECK(positions.defined() && positions.numel() == B_ * T_,
                "language model: packed documents need a position per token, got {}",
                positions.defined() ? positions.str() : "none");
    docs_ = nn::DocLayout::from_segments(*segments, B_, T_, ctx.device);
    position_->add_at(x, positions, ctx);
  } else {
    position_->add(x, 0, ctx);
  }
  x = drop_->forward(x, ctx);
  if (rel_) rel_->prepare(ctx);
  // Right padding only (the last block of a set): the causal mask hides every
  // pad key from the real queries, so no key lengths are needed.
  const nn::DocLayout* docs = docs_ ? &*docs_ : nullptr;
  for (auto& layer : layers_) x = layer->forward(x, Tensor(), ctx, nullptr, docs);
  Tensor h = x.view({B_ * T_, d});  // [B*T, d]
  if (norm_) h = norm_->forward(h, ctx);
  return h;
}

Tensor DecoderLM::logits(const Tensor& h, const Context& ctx) const {
  Tensor out = ctx.empty({h.size(0), options_.vocab_size});  // [N, V]
  ops::GemmOptions o;
  o.trans_b = true;
  ops::gemm(h, output_table()->value_in(ctx.dtype), out, o);
  return out;
}

LmSums DecoderLM::forward_loss(const LmBatch& batch, const Context& ctx) {
  ROTOR_CHECK(batch.targets.shape() == batch.input_ids.shape(),
              "LmBatch: targets {} do not match inputs {}", batch.targets.str(),
              batch.input_ids.str());
  batch_ = batch;
  ctx_ = ctx;
  out_ = hidden(batch.input_ids, ctx, &batch.segments, batch.positions);
  const int64_t N = B_ * T_;
  Tensor lg = logits(out_, ctx);                             // [N, V]
  Tensor loss = Tensor::empty({N}, DType::F32, ctx.device);  // f32 [N]
  Tensor nll = Tensor::empty({N}, DType::F32, ctx.device);   // f32 [N]
  lse_ = Tensor::empty({N}, DType::F32, ctx.device);
  Tensor targets = batch.targets.view({N});  // i32 [N]
  ops::cross_entropy_forward(lg, targets, 0.0f, options_.pad_id, loss, nll, lse_);
  LmSums sums;
  sums.loss = ops::sum(nll);
  sums.tokens = batch.tokens;
  sums.has_correct = !ctx.training;
  if (sums.has_correct) sums.correct = ops::count_top1_hits(lg, targets, options_.pad_id);
  return sums;
}

void DecoderLM::backward(float loss_scale) {
  const Context& ctx = ctx_;
  // Each part is reported to ctx.grad_ready right after its backward, in
  // descending offsets (construction order); the token embedding last, after
  // the output projection tied to it has added its gradient.
  const auto ready = [&](const nn::ParamRange& r) { ctx.report_grads_ready(*store_, r); };
  const int64_t N = B_ * T_, d = options_.layer.d_model;
  // Recompute the logits rather than keep [N, V] alive between the passes.
  Tensor lg = logits(out_, ctx);           // [N, V]
  Tensor dlogits = ctx.empty(lg.shape());  // [N, V]
  ops::cross_entropy_backward(lg, batch_.targets.view({N}), lse_, 0.0f, options_.pad_id, loss_scale,
                              dlogits);
  lg = Tensor();
  // logits = h W^T: dW += dlogits^T h, dh = dlogits W.
  nn::Parameter* table = output_table();
  ops::GemmOptions acc;
  acc.trans_a = true;
  acc.beta = 1.0f;
  ops::gemm(dlogits, out_, table->grad, acc);
  Tensor dh = ctx.empty({N, d});  // [N, d]
  ops::gemm(dlogits, table->value_in(dlogits.dtype()), dh, {});
  dlogits = Tensor();
  ready(ranges_.head);
  if (norm_) dh = norm_->backward(dh);
  ready(ranges_.norm);
  Tensor dx = dh.view({B_, T_, d});  // [B, T, d]
  for (size_t i = layers_.size(); i-- > 0;) {
    dx = layers_[i]->backward(dx);
    ready(ranges_.layers[i]);
  }
  if (rel_) rel_->backward();
  dx = drop_->backward(dx);
  if (docs_)
    position_->backward_at(dx, batch_.positions);
  else
    position_->backward(dx, 0);
  ready(ranges_.position);
  embedding_->backward(batch_.input_ids.view({N}), dx.view({N, d}));
  ready(ranges_.embedding);
  docs_.reset();
  out_ = lse_ = Tensor();
  batch_ = LmBatch{};
  ctx_.grad_ready = nullptr;  // the listener lives only for this backward
}

Tensor DecoderLM::forward_logits(const Tensor& input_ids, const Context& ctx) {
  Tensor h = hidden(input_ids, ctx);  // [B*T, d]
  return logits(h, ctx).view({B_, T_, options_.vocab_size});
}

Tensor DecoderLM::forward_logits(const LmBatch& batch, const Context& ctx) {
  Tensor h = hidden(batch.input_ids, ctx, &batch.segments, batch.positions);  // [B*T, d]
  docs_.reset();
  return logits(h, ctx).view({B_, T_, options_.vocab_size});
}

Tensor DecoderLM::prefill(LmDecodeState& state, const Tensor& ids,
                          const std::vector<int64_t>& lengths, int64_t max_length,
                          const Context& ctx) {
  ROTOR_CHECK(ids.dim() == 2 && ids.dtype() == DType::I32,
              "language model prefill: ids must be i32 [B, T], got {}", ids.str());
  const int64_t B = ids.size(0), T = ids.size(1), d = options_.layer.d_model;
  ROTOR_CHECK(static_cast<int64_t>(lengths.size()) == B,
              "language model prefill: {} lengths for {} rows", lengths.size(), B);
  std::vector<int32_t> last(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    ROTOR_CHECK(lengths[b] >= 1 && lengths[b] <= T,
                "language model prefill: row {} has {} tokens of {}", b, lengths[b], T);
    last[static_cast<size_t>(b)] = static_cast<int32_t>(b * T + lengths[b] - 1);
  }
  state = LmDecodeState{};
  state.layers.resize(layers_.size());
  state.lengths = lengths;
  state.max_length = max_length;
  Tensor x = embedding_->apply(ids, ctx).view({B, T, d});  // [B, T, d]
  position_->add(x, 0, ctx);
  if (rel_) rel_->prepare(ctx);
  for (size_t i = 0; i < layers_.size(); ++i)
    x = layers_[i]->prefill(x, state.layers[i], max_length, ctx);
  Tensor h = ctx.empty({B, d});  // [B, d]: each row's last prompt position
  ops::index_select(x.view({B * T, d}), Tensor::from_ints(last, {B}, ctx.device), h);
  if (norm_) h = norm_->apply(h, ctx);
  return logits(h, ctx);
}

Tensor DecoderLM::decode_step(LmDecodeState& state, const Tensor& tokens, const Context& ctx) {
  ROTOR_CHECK(tokens.dim() == 1 && tokens.dtype() == DType::I32,
              "language model step: tokens must be i32 [B], got {}", tokens.str());
  const int64_t B = tokens.size(0), d = options_.layer.d_model;
  ROTOR_CHECK(
      static_cast<int64_t>(state.lengths.size()) == B && state.layers.size() == layers_.size(),
      "language model step: {} tokens for a state of {} rows (prefill first)", B,
      state.lengths.size());
  Tensor x = embedding_->apply(tokens, ctx).view({B, 1, d});  // [B, 1, d]
  if (position_->kind()->adds_to_embeddings())
    for (int64_t b = 0; b < B; ++b) {
      Tensor row = x.narrow(b, 1);  // [1, 1, d]
      position_->add(row, state.lengths[b], ctx);
    }
  if (rel_) rel_->prepare(ctx);
  for (size_t i = 0; i < layers_.size(); ++i)
    x = layers_[i]->step(x, state.layers[i], state.lengths, ctx);
  for (int64_t& n : state.lengths) ++n;
  Tensor h = x.view({B, d});  // [B, d]
  if (norm_) h = norm_->apply(h, ctx);
  return logits(h, ctx);
}

void DecoderLM::keep_rows(LmDecodeState& state, const std::vector<int32_t>& rows,
                          const Context& ctx) const {
  const int64_t n = static_cast<int64_t>(rows.size());
  Tensor index = Tensor::from_ints(rows, {n}, ctx.device);  // i32 [B']
  auto gather = [&](Tensor& t) {
    Shape s = t.shape();
    s[0] = n;
    Tensor out = Tensor::empty(s, t.dtype(), t.device());  // [B', H, max_length, D]
    ops::index_select(t, index, out);
    t = out;
  };
  std::vector<int64_t> lengths;
  for (int32_t r : rows) {
    ROTOR_CHECK(r >= 0 && static_cast<size_t>(r) < state.lengths.size(),
                "language model keep_rows: row {} of {}", r, state.lengths.size());
    lengths.push_back(state.lengths[static_cast<size_t>(r)]);
  }
  for (auto& c : state.layers) {
    gather(c.k);
    gather(c.v);
  }
  state.lengths = std::move(lengths);
}

}  // namespace rotor::models
