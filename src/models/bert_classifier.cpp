#include "models/bert_classifier.h"

#include <algorithm>
#include <cmath>

#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/reduce.h"

namespace rotor::models {

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
  if (c.roformer_head()) {
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
        store.find(c.roformer_head() ? "classifier.out_proj.bias" : "classifier.bias");
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
  // tanh of the pooler on the host: ops has no tanh, and these B x d values
  // cost nothing beside the encoder.
  Tensor pre = pooler_->forward(h_cls, ctx);  // [B, d]
  pooled_ = pre.to_floats();
  for (float& v : pooled_) v = std::tanh(v);
  Tensor x = Tensor::from_floats(pooled_, pre.shape(), pre.dtype(), pre.device());  // [B, d]
  x = drop_->forward(x, ctx);
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
  std::vector<float> g = dpooled.to_floats();
  for (size_t i = 0; i < g.size(); ++i) g[i] *= 1.0f - pooled_[i] * pooled_[i];  // tanh'
  // [B, d]
  Tensor dpre = Tensor::from_floats(g, dpooled.shape(), dpooled.dtype(), dpooled.device());
  return pooler_->backward(dpre);
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
  cls_rows_ = Tensor::from_ints(rows, {E_}, ctx.device);
  Tensor h_cls = ctx.empty({E_, d});                                     // [E, d]
  ops::embedding_forward(cls_rows_, h.view({B_ * T_, d}), 1.0f, h_cls);  // gather [CLS]
  logits_ = head_forward(h_cls, ctx);                                    // [E, C]
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
  Tensor dcls = head_backward(dlogits);  // [B, d]
  ctx.report_grads_ready(*store_, head_range_);
  const int64_t d = options_.encoder.layer.d_model;
  Tensor dh = ctx.zeros({B_ * T_, d});                     // [B*T, d]
  ops::embedding_backward(cls_rows_, dcls, 1.0f, dh, -1);  // scatter to the [CLS] rows
  encoder_.backward(dh.view({B_, T_, d}), ctx);
  logits_ = labels_ = lse_ = cls_rows_ = Tensor();
  residuals_.clear();
  pooled_.clear();
  ctx_.grad_ready = nullptr;  // the listener lives only for this backward
}

}  // namespace rotor::models
