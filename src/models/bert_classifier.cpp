#include "models/bert_classifier.h"

#include <algorithm>
#include <cmath>

#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/reduce.h"

namespace rotor::models {

bool has_label_rows(const std::string& name) {
  for (const char* n : {"classifier.weight", "classifier.bias", "classifier.out_proj.weight",
                        "classifier.out_proj.bias", "classifier.label_queries",
                        "classifier.label_weight", "classifier.label_bias"})
    if (name == n) return true;
  return false;
}

using nn::Context;
using nn::Init;

ClassificationBatch ClassificationBatch::to(Device device) const {
  ClassificationBatch b = *this;
  for (Tensor* t : {&b.input_ids, &b.token_type_ids, &b.lengths, &b.age_ids, &b.position_ids,
                    &b.labels, &b.targets})
    if (t->defined()) *t = t->to(device);
  return b;
}

BertForSequenceClassification::BertForSequenceClassification(const BertClassifierOptions& c,
                                                             nn::ParameterStore& store)
    : options_(c), store_(&store), encoder_(c.encoder, store) {
  ROTOR_CHECK(
      c.num_labels >= 1 && (!c.regression || c.num_labels == 1) && !(c.regression && c.multilabel),
      "classifier: {} labels{}", c.num_labels, c.regression ? " for regression" : "");
  ROTOR_CHECK(
      c.choices == 0 || (c.choices >= 2 && c.num_labels == 1 && !c.regression && !c.multilabel),
      "classifier: {} choices need one score a row ({} labels)", c.choices, c.num_labels);
  const int64_t d = c.encoder.layer.d_model, C = c.num_labels;
  const Init w = Init::normal(c.encoder.init_std);
  const size_t mark = nn::ParamRange::mark(store);
  if (c.label_attention) {
    label_queries_ = store.add("classifier.label_queries", {C, d}, w);
    label_weight_ = store.add("classifier.label_weight", {C, d}, w);
    label_bias_ = store.add("classifier.label_bias", {C}, Init::zeros(), true);
    drop_ = std::make_unique<nn::Dropout>(store, c.dropout);
  } else if (c.roformer_head()) {
    drop_ = std::make_unique<nn::Dropout>(store, c.dropout);
    dense_ = std::make_unique<nn::Linear>(store, "classifier.dense", d, d, true, w,
                                          c.encoder.layer.activation);
    drop2_ = std::make_unique<nn::Dropout>(store, c.dropout);
    out_proj_ = std::make_unique<nn::Linear>(store, "classifier.out_proj", d, C, true, w);
  } else {
    pooler_ =
        std::make_unique<nn::Linear>(store, c.encoder.prefix() + ".pooler.dense", d, d, true, w);
    drop_ = std::make_unique<nn::Dropout>(store, c.dropout);
    classifier_ = std::make_unique<nn::Linear>(store, "classifier", d, C, true, w);
  }
  head_range_ = {mark, nn::ParamRange::mark(store)};
  if (!c.output_bias.empty()) {
    ROTOR_CHECK(static_cast<int64_t>(c.output_bias.size()) == C,
                "classifier: {} initial output biases for {} outputs", c.output_bias.size(), C);
    nn::Parameter* bias =
        c.label_attention
            ? label_bias_
            : store.find(c.roformer_head() ? "classifier.out_proj.bias" : "classifier.bias");
    ROTOR_CHECK(bias != nullptr, "classifier: no output bias");
    bias->init = Init::from_values(c.output_bias);
  }
}

Tensor BertForSequenceClassification::head_forward(const Tensor& h_cls, const Context& ctx) {
  if (options_.roformer_head()) {
    Tensor x = drop_->forward(h_cls, ctx);  // [B, d]
    x = dense_->forward(x, ctx);            // the activation fused
    x = drop2_->forward(x, ctx);
    return out_proj_->forward(x, ctx);
  }
  Tensor pre = pooler_->forward(h_cls, ctx);  // [B, d]
  pooled_ = ctx.empty(pre.shape());           // [B, d]
  ops::tanh_forward(pre, pooled_);
  Tensor x = drop_->forward(pooled_, ctx);  // [B, d]
  return classifier_->forward(x, ctx);
}

Tensor BertForSequenceClassification::head_backward(const Tensor& dlogits) {
  if (options_.roformer_head()) {
    Tensor dx = out_proj_->backward(dlogits);  // [B, d]
    dx = drop2_->backward(dx);
    dx = dense_->backward(dx);
    return drop_->backward(dx);
  }
  Tensor dpooled = drop_->backward(classifier_->backward(dlogits));  // [B, d]
  Tensor dpre = ctx_.empty(dpooled.shape());                         // [B, d]
  ops::tanh_backward(dpooled, pooled_, dpre);
  return pooler_->backward(dpre);
}

Tensor BertForSequenceClassification::label_attention_forward(
    const Tensor& h, const std::vector<std::vector<int32_t>>& rows, const Context& ctx) {
  const int64_t d = options_.encoder.layer.d_model, C = options_.num_labels;
  const int64_t E = static_cast<int64_t>(rows.size());
  int64_t Tm = 1;
  for (const auto& r : rows) Tm = std::max<int64_t>(Tm, static_cast<int64_t>(r.size()));
  // Each example's token rows, padded with its first (the keys past its
  // length are masked, and their gradients are zero).
  std::vector<int32_t> tokens(static_cast<size_t>(E * Tm)), lengths(static_cast<size_t>(E));
  std::vector<int32_t> outputs(static_cast<size_t>(E * C));
  for (int64_t e = 0; e < E; ++e) {
    const auto& r = rows[static_cast<size_t>(e)];
    ROTOR_CHECK(!r.empty(), "classifier: example {} has no tokens", e);
    lengths[static_cast<size_t>(e)] = static_cast<int32_t>(r.size());
    for (int64_t t = 0; t < Tm; ++t)
      tokens[static_cast<size_t>(e * Tm + t)] = r[static_cast<size_t>(t) < r.size() ? t : 0];
    for (int64_t c = 0; c < C; ++c)
      outputs[static_cast<size_t>(e * C + c)] = static_cast<int32_t>(c);
  }
  la_tokens_ = Tensor::from_ints(tokens, {E * Tm}, ctx.device);
  la_lengths_ = Tensor::from_ints(lengths, {E}, ctx.device);
  la_outputs_ = Tensor::from_ints(outputs, {E * C}, ctx.device);
  la_h_ = ctx.empty({E, 1, Tm, d});
  Tensor h_rows = la_h_.view({E * Tm, d});  // [E * Tm, d]
  ops::embedding_forward(la_tokens_, h.view({h.size(0) * h.size(1), d}), 1.0f, h_rows);
  la_q_ = ctx.empty({E, 1, C, d});         // u_c for every example
  Tensor q_rows = la_q_.view({E * C, d});  // [E * C, d]
  ops::embedding_forward(la_outputs_, label_queries_->value_in(ctx.dtype), 1.0f, q_rows);
  ops::AttentionOptions o;
  o.key_lengths = la_lengths_;
  Tensor att = ctx.empty({E, 1, C, d});  // [E, 1, C, d]
  la_probs_ = ctx.empty({E, 1, C, Tm});
  ops::attention_forward(la_q_, la_h_, la_h_, o, att, la_probs_);
  pooled_ = ctx.empty({E, C, d});  // v = tanh(att) [E, C, d]
  ops::tanh_forward(att.view({E, C, d}), pooled_);
  la_v_ = drop_->forward(pooled_, ctx);
  la_w_ = ctx.empty({E, C, d});            // w_c for every example
  Tensor w_rows = la_w_.view({E * C, d});  // [E * C, d]
  ops::embedding_forward(la_outputs_, label_weight_->value_in(ctx.dtype), 1.0f, w_rows);
  Tensor prod = ctx.empty({E * C, d});  // [E * C, d]
  ops::mul(la_v_.view({E * C, d}), w_rows, prod);
  // [d]: the row sums below, and dz broadcast over d in the backward
  la_ones_ = Tensor::from_floats(std::vector<float>(static_cast<size_t>(d), 1.0f), {d}, ctx.dtype,
                                 ctx.device);
  Tensor z = ctx.empty({E * C, 1});           // [E * C, 1]
  ops::gemm(prod, la_ones_.view({d, 1}), z);  // the row sums: w_c . dropout(v_c)
  Tensor logits = z.view({E, C});             // [E, C]
  ops::add_bias(logits, label_bias_->value_in(ctx.dtype));
  return logits;
}

void BertForSequenceClassification::label_attention_backward(const Tensor& dlogits, Tensor& dh) {
  const Context& ctx = ctx_;
  const int64_t d = options_.encoder.layer.d_model, C = options_.num_labels;
  const int64_t E = la_lengths_.numel(), Tm = la_h_.size(2);
  ops::sum_rows(dlogits, label_bias_->grad, true);
  Tensor dprod = ctx.empty({E * C, d});  // [E * C, d]: dz broadcast over d
  ops::gemm(dlogits.view({E * C, 1}), la_ones_.view({1, d}), dprod);
  Tensor g = ctx.empty({E * C, d});  // [E * C, d]
  ops::mul(dprod, la_v_.view({E * C, d}), g);
  ops::embedding_backward(la_outputs_, g, 1.0f, label_weight_->grad);
  ops::mul(dprod, la_w_.view({E * C, d}), g);
  Tensor dv = drop_->backward(g.view({E, C, d}));  // [E, C, d]
  Tensor datt_t = ctx.empty({E, 1, C, d});         // [E, 1, C, d]
  Tensor datt = datt_t.view({E, C, d});            // [E, C, d]
  ops::tanh_backward(dv, pooled_, datt);
  ops::AttentionOptions o;
  o.key_lengths = la_lengths_;
  // [E, 1, C, d], [E, 1, Tm, d] twice
  Tensor dq = ctx.empty({E, 1, C, d}), dk = ctx.empty({E, 1, Tm, d}),
         dvals = ctx.empty({E, 1, Tm, d});
  ops::attention_backward(la_q_, la_h_, la_h_, la_probs_, datt_t, o, dq, dk, dvals);
  ops::embedding_backward(la_outputs_, dq.view({E * C, d}), 1.0f, label_queries_->grad);
  ops::add(dk, dvals, dk);
  ops::embedding_backward(la_tokens_, dk.view({E * Tm, d}), 1.0f, dh);
  la_tokens_ = la_lengths_ = la_outputs_ = la_h_ = la_q_ = la_probs_ = la_w_ = la_v_ = la_ones_ =
      Tensor();
}

ClassificationSums BertForSequenceClassification::forward_loss(const ClassificationBatch& batch,
                                                               const Context& ctx,
                                                               std::vector<float>* logits_out) {
  ctx_ = ctx;
  // [B, T, d]
  Tensor h = encoder_.forward(EncoderInputs{batch.input_ids, batch.token_type_ids, batch.lengths,
                                            batch.age_ids, batch.position_ids, batch.documents},
                              ctx);
  B_ = h.size(0);
  T_ = h.size(1);
  const int64_t d = options_.encoder.layer.d_model;
  const bool packed = !batch.documents.empty();
  ROTOR_CHECK(!packed || !batch.cls_positions.empty(),
              "classifier: packed examples need their [CLS] positions");
  std::vector<int32_t> rows = batch.cls_positions;  // each example's [CLS]
  if (!packed) {
    rows.resize(static_cast<size_t>(B_));
    for (int64_t b = 0; b < B_; ++b) rows[static_cast<size_t>(b)] = static_cast<int32_t>(b * T_);
  }
  E_ = static_cast<int64_t>(rows.size());
  if (options_.label_attention) {
    // Each example's tokens, from its [CLS] on: the row's first lengths[b]
    // tokens, or (packed) the run of its example index.
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(E_));
    const std::vector<int32_t> len = packed ? std::vector<int32_t>() : batch.lengths.to_ints();
    for (int64_t e = 0; e < E_; ++e) {
      const int32_t first = rows[static_cast<size_t>(e)];
      const int64_t row = first / T_;
      auto& list = tokens[static_cast<size_t>(e)];
      for (int64_t t = first % T_; t < T_; ++t) {
        const int64_t at = row * T_ + t;
        if (packed ? batch.documents[static_cast<size_t>(at)] !=
                         batch.documents[static_cast<size_t>(first)]
                   : t >= len[static_cast<size_t>(row)])
          break;
        list.push_back(static_cast<int32_t>(at));
      }
    }
    logits_ = label_attention_forward(h, tokens, ctx);  // [E, C]
  } else {
    cls_rows_ = Tensor::from_ints(rows, {E_}, ctx.device);
    Tensor h_cls = ctx.empty({E_, d});                                     // [E, d]
    ops::embedding_forward(cls_rows_, h.view({B_ * T_, d}), 1.0f, h_cls);  // gather [CLS]
    logits_ = head_forward(h_cls, ctx);                                    // [E, C]
  }
  int64_t C = options_.num_labels, examples = E_;
  if (options_.choices > 0) {  // each example's N pairs' scores as its logits
    C = options_.choices;
    ROTOR_CHECK(E_ % C == 0, "classifier: {} pairs are not {} choices an example", E_, C);
    examples = E_ / C;
    logits_ = logits_.view({examples, C});  // [B, N]
  }
  const std::vector<float> lg = logits_.to_floats();
  if (logits_out) *logits_out = lg;

  ClassificationSums sums;
  labels_ = lse_ = Tensor();
  residuals_.clear();
  if (options_.multilabel && batch.targets.defined()) {
    const std::vector<float> t = batch.targets.to_floats();
    ROTOR_CHECK(static_cast<int64_t>(t.size()) == E_ * C, "classifier: {} targets for {} x {}",
                t.size(), E_, C);
    residuals_.resize(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      const double z = lg[i], y = t[i];
      const double e = std::exp(-std::abs(z));  // in (0, 1]: no overflow
      sums.loss += (std::max(z, 0.0) - z * y + std::log1p(e)) / static_cast<double>(C);
      const double sigmoid = z >= 0 ? 1 / (1 + e) : e / (1 + e);
      residuals_[i] = static_cast<float>((sigmoid - y) / static_cast<double>(C));
    }
    sums.examples = E_;
  } else if (options_.regression && batch.targets.defined()) {
    const std::vector<float> t = batch.targets.to_floats();
    ROTOR_CHECK(static_cast<int64_t>(t.size()) == E_, "classifier: {} targets for {} examples",
                t.size(), E_);
    for (int64_t b = 0; b < E_; ++b) {
      const double r = static_cast<double>(lg[static_cast<size_t>(b)]) - t[static_cast<size_t>(b)];
      residuals_.push_back(static_cast<float>(r));
      sums.loss += r * r;
    }
    sums.examples = E_;
  } else if (!options_.regression && batch.labels.defined()) {
    labels_ = batch.labels;
    ROTOR_CHECK(labels_.numel() == examples, "classifier: {} labels for {} examples",
                labels_.numel(), examples);
    Tensor loss = Tensor::empty({examples}, DType::F32, ctx.device);  // f32 [B]
    Tensor nll = Tensor::empty({examples}, DType::F32, ctx.device);   // f32 [B]
    lse_ = Tensor::empty({examples}, DType::F32, ctx.device);
    ops::cross_entropy_forward(logits_, labels_, 0.0f, -1, loss, nll, lse_);
    sums.loss = ops::sum(nll);
    sums.examples = examples;
    sums.has_correct = true;
    const std::vector<int32_t> y = labels_.to_ints();
    for (int64_t b = 0; b < examples; ++b) {
      const float* row = lg.data() + b * C;
      sums.correct += std::max_element(row, row + C) - row == y[static_cast<size_t>(b)];
    }
  }
  return sums;
}

void BertForSequenceClassification::backward(float loss_scale) {
  const Context& ctx = ctx_;
  ROTOR_CHECK(lse_.defined() || !residuals_.empty(),
              "classifier backward without a loss (the batch had no labels)");
  Tensor dlogits;  // [B, C]
  if (options_.multilabel) {
    std::vector<float> g(residuals_.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = loss_scale * residuals_[i];
    dlogits = Tensor::from_floats(g, logits_.shape(), logits_.dtype(), logits_.device());
  } else if (options_.regression) {
    // d(r^2)/dy = 2 r.
    std::vector<float> g(residuals_.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = 2.0f * loss_scale * residuals_[i];
    dlogits = Tensor::from_floats(g, logits_.shape(), logits_.dtype(), logits_.device());
  } else {
    dlogits = ctx.empty(logits_.shape());
    ops::cross_entropy_backward(logits_, labels_, lse_, 0.0f, -1, loss_scale, dlogits);
    if (options_.choices > 0) dlogits = dlogits.view({E_, 1});  // [B * N, 1]: a pair's score
  }
  const int64_t d = options_.encoder.layer.d_model;
  Tensor dh = ctx.zeros({B_ * T_, d});  // [B*T, d]
  if (options_.label_attention) {
    label_attention_backward(dlogits, dh);
    ctx.report_grads_ready(*store_, head_range_);
  } else {
    Tensor dcls = head_backward(dlogits);  // [B, d]
    ctx.report_grads_ready(*store_, head_range_);
    ops::embedding_backward(cls_rows_, dcls, 1.0f, dh, -1);  // scatter to the [CLS] rows
  }
  encoder_.backward(dh.view({B_, T_, d}), ctx);
  logits_ = labels_ = lse_ = cls_rows_ = Tensor();
  residuals_.clear();
  pooled_ = Tensor();
  ctx_.grad_ready = nullptr;  // the listener lives only for this backward
}

}  // namespace rotor::models
