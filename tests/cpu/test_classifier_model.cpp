// The sequence classifier (models/bert_classifier.h): finite-difference
// gradient checks of the whole model and its heads (BERT's pooler + tanh and
// classifier; RoFormer's dense + GELU and out_proj; cross-entropy, squared
// error and multi-label binary cross-entropy; dropout on with fixed masks), in fp32 the robust way
// (central differences on the loss, tolerance 2e-3 + 2e-2 |analytic|, every parameter with a
// nonzero gradient); the loss against one computed here from the logits; Hugging Face's parameter
// names; the grad_ready reports; batches without labels.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "core/error.h"
#include "models/bert_classifier.h"
#include "support/model_gradcheck.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using test::jitter;

models::BertClassifierOptions tiny(bool roformer, bool regression, bool multilabel = false) {
  models::BertClassifierOptions c;
  c.encoder.vocab_size = 40;
  c.encoder.num_layers = 2;
  c.encoder.layer = models::bert_base_layer();
  c.encoder.layer.d_model = 16;
  c.encoder.layer.n_heads = 2;
  c.encoder.layer.d_ff = 32;
  c.encoder.layer.layer_norm_eps = 1e-12f;
  c.encoder.position = roformer ? nn::PositionKind::Rope : nn::PositionKind::Learned;
  c.encoder.max_positions = 16;
  c.encoder.init_std = 0.3;
  c.regression = regression;
  c.multilabel = multilabel;
  c.num_labels = regression ? 1 : 3;
  c.dropout = 0.1f;
  return c;
}

// Three rows ([CLS] a [SEP] b [SEP], padded), token types, labels or targets
// (multilabel: two labels, none, one).
models::ClassificationBatch tiny_batch(bool regression, bool multilabel = false) {
  models::ClassificationBatch b;
  const int64_t B = 3, T = 7;
  b.input_ids = Tensor::from_ints(
      {5, 12, 8, 6, 17, 9, 6, 5, 22, 6, 11, 6, 0, 0, 5, 30, 31, 32, 6, 0, 0}, {B, T});
  b.token_type_ids =
      Tensor::from_ints({0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {B, T});
  b.lengths = Tensor::from_ints({7, 5, 5}, {B});
  if (multilabel)
    b.targets = Tensor::from_floats({1, 0, 1, 0, 0, 0, 0, 1, 0}, {B, 3});
  else if (regression)
    b.targets = Tensor::from_floats({0.5f, -1.25f, 2.0f}, {B});
  else
    b.labels = Tensor::from_ints({2, 0, 1}, {B});
  b.tokens = 17;
  return b;
}

struct HeadCase {
  bool roformer, regression;
  const char* name;
  bool multilabel = false;
  bool label_attention = false;  // model.classifier_head label_attention
};

class ClassifierGrad : public ::testing::TestWithParam<HeadCase> {};

TEST_P(ClassifierGrad, MatchesFiniteDifferences) {
  const HeadCase hc = GetParam();
  nn::ParameterStore store;
  models::BertClassifierOptions options = tiny(hc.roformer, hc.regression, hc.multilabel);
  options.label_attention = hc.label_attention;
  models::BertForSequenceClassification model(options, store);
  store.allocate(Device::cpu());
  store.initialize(1);
  jitter(store, 2, 0.1f);
  nn::Parameter* word =
      store.find(model.options().encoder.prefix() + ".embeddings.word_embeddings.weight");
  ASSERT_NE(word, nullptr);
  for (int64_t j = 0; j < 16; ++j) word->value.data<float>()[j] = 0.0f;  // the pad row
  const models::ClassificationBatch batch = tiny_batch(hc.regression, hc.multilabel);
  nn::Context ctx;
  ctx.training = true;  // dropout on: the same masks in every call (same step)
  ctx.seed = 3;
  ctx.micro_step = 2;
  auto objective = [&]() { return model.forward_loss(batch, ctx).loss; };
  store.zero_grad();
  std::vector<float> logits;
  const models::ClassificationSums s = model.forward_loss(batch, ctx, &logits);
  EXPECT_EQ(s.examples, 3);
  EXPECT_EQ(s.has_correct, !hc.regression && !hc.multilabel);
  // The loss from the logits, computed here.
  const int64_t C = model.options().num_labels;
  ASSERT_EQ(static_cast<int64_t>(logits.size()), 3 * C);
  double expect = 0;
  int64_t correct = 0;
  for (int64_t b = 0; b < 3; ++b) {
    const float* row = logits.data() + b * C;
    if (hc.multilabel) {  // -y log s(z) - (1 - y) log(1 - s(z)), averaged over the labels
      for (int64_t k = 0; k < C; ++k) {
        const double z = row[k], y = batch.targets.to_floats()[static_cast<size_t>(b * C + k)];
        const double p = 1 / (1 + std::exp(-z));
        expect += -(y * std::log(p) + (1 - y) * std::log(1 - p)) / static_cast<double>(C);
      }
      continue;
    }
    if (hc.regression) {
      const double r = row[0] - batch.targets.to_floats()[static_cast<size_t>(b)];
      expect += r * r;
      continue;
    }
    const int32_t y = batch.labels.to_ints()[static_cast<size_t>(b)];
    double z = 0;
    for (int64_t k = 0; k < C; ++k) z += std::exp(static_cast<double>(row[k]));
    expect += std::log(z) - row[y];
    correct += std::max_element(row, row + C) - row == y;
  }
  EXPECT_NEAR(s.loss, expect, 1e-5 * std::max(1.0, expect));
  EXPECT_EQ(s.correct, correct);
  model.backward(1.0f);

  // Without rotation the key bias shifts all of a query's scores alike
  // (softmax cancels it): exactly zero gradient, checked all the same.
  const int checked = test::check_model_gradients(store, objective, [&](const std::string& name) {
    return name.find("attention.self.key.bias") != std::string::npos && !hc.roformer;
  });
  EXPECT_GT(checked, 100);
}

INSTANTIATE_TEST_SUITE_P(
    Heads, ClassifierGrad,
    ::testing::Values(HeadCase{false, false, "bert_classes"},
                      HeadCase{false, true, "bert_regression"},
                      HeadCase{true, false, "roformer_classes"},
                      HeadCase{true, true, "roformer_regression"},
                      HeadCase{false, false, "bert_multilabel", true},
                      HeadCase{true, false, "roformer_multilabel", true},
                      HeadCase{false, false, "label_attention_multilabel", true, true},
                      HeadCase{true, false, "label_attention_classes", false, true},
                      HeadCase{false, true, "label_attention_regression", false, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Classifier, HuggingFaceHeadNames) {
  for (bool roformer : {false, true}) {
    nn::ParameterStore store;
    models::BertForSequenceClassification model(tiny(roformer, false), store);
    std::map<std::string, Shape> head;
    for (const auto& p : store.parameters())
      if (p->name.find("pooler") != std::string::npos || p->name.rfind("classifier", 0) == 0)
        head[p->name] = p->shape;
    const std::map<std::string, Shape> want =
        roformer ? std::map<std::string, Shape>{{"classifier.dense.weight", {16, 16}},
                                                {"classifier.dense.bias", {16}},
                                                {"classifier.out_proj.weight", {3, 16}},
                                                {"classifier.out_proj.bias", {3}}}
                 : std::map<std::string, Shape>{{"bert.pooler.dense.weight", {16, 16}},
                                                {"bert.pooler.dense.bias", {16}},
                                                {"classifier.weight", {3, 16}},
                                                {"classifier.bias", {3}}};
    EXPECT_EQ(head, want);
    // The head comes after the encoder (grad_ready reports it first).
    EXPECT_EQ(store.parameters().back()->name,
              roformer ? "classifier.out_proj.bias" : "classifier.bias");
  }
}

// Label attention (model.classifier_head label_attention): its parameters,
// named apart from the [CLS] heads', and logits computed here from the
// encoder's final states, which a model whose head reads them exposes through
// one output per state: with u_c = 0 every token weighs the same, so
// logit_c = w_c . tanh(mean_t h_t) + b_c over the example's tokens; padding
// changes nothing.
TEST(Classifier, LabelAttentionHead) {
  nn::ParameterStore store;
  models::BertClassifierOptions o = tiny(false, false, true);
  o.label_attention = true;
  o.output_bias = {0.5f, -1.0f, 2.0f};
  models::BertForSequenceClassification model(o, store);
  std::map<std::string, Shape> head;
  for (const auto& p : store.parameters())
    if (p->name.find("pooler") != std::string::npos || p->name.rfind("classifier", 0) == 0)
      head[p->name] = p->shape;
  EXPECT_EQ(head, (std::map<std::string, Shape>{{"classifier.label_queries", {3, 16}},
                                                {"classifier.label_weight", {3, 16}},
                                                {"classifier.label_bias", {3}}}));
  store.allocate(Device::cpu());
  store.initialize(7);
  EXPECT_EQ(store.find("classifier.label_bias")->value.to_floats(), o.output_bias);
  const models::ClassificationBatch batch = tiny_batch(false, true);
  nn::Context ctx;  // evaluation: no dropout
  std::vector<float> logits;
  model.forward_loss(batch, ctx, &logits);
  // The same with every query zero: uniform attention over each example.
  nn::Parameter* q = store.find("classifier.label_queries");
  const std::vector<float> queries = q->value.to_floats();
  q->value.copy_from(Tensor::zeros({3, 16}));
  std::vector<float> uniform;
  model.forward_loss(batch, ctx, &uniform);
  EXPECT_NE(uniform, logits);  // the queries matter
  // The encoder's states, read through the BERT encoder of the same weights.
  nn::ParameterStore enc_store;
  models::BertEncoder encoder(o.encoder, enc_store);
  enc_store.allocate(Device::cpu());
  for (const auto& p : enc_store.parameters()) p->value.copy_from(store.find(p->name)->value);
  const Tensor h = encoder.forward(
      models::EncoderInputs{
          batch.input_ids, batch.token_type_ids, batch.lengths, Tensor(), Tensor(), {}},
      ctx);
  const std::vector<float> hs = h.to_floats(),
                           w = store.find("classifier.label_weight")->value.to_floats();
  const std::vector<int32_t> lengths = batch.lengths.to_ints();
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t c = 0; c < 3; ++c) {
      double z = o.output_bias[static_cast<size_t>(c)];
      for (int64_t k = 0; k < 16; ++k) {
        double mean = 0;
        for (int64_t t = 0; t < lengths[static_cast<size_t>(b)]; ++t)
          mean += hs[static_cast<size_t>((b * 7 + t) * 16 + k)];
        mean /= lengths[static_cast<size_t>(b)];
        z += w[static_cast<size_t>(c * 16 + k)] * std::tanh(mean);
      }
      EXPECT_NEAR(uniform[static_cast<size_t>(b * 3 + c)], z, 1e-5) << b << " " << c;
    }
  // Padding tokens are never read.
  q->value.copy_from(Tensor::from_floats(queries, {3, 16}));
  models::ClassificationBatch padded = batch;
  std::vector<int32_t> ids = batch.input_ids.to_ints();
  ids[5 * 1 + 7 * 1] = 33;  // row 1, t = 5: past its length 5
  ids[6 + 7 * 2] = 34;      // row 2, t = 6
  padded.input_ids = Tensor::from_ints(ids, {3, 7});
  std::vector<float> again;
  model.forward_loss(padded, ctx, &again);
  EXPECT_EQ(again, logits);
}

// output_bias (task multilabel's model.classifier_bias: prior) is the output
// bias after initialize, whichever the head; the rest is the seed's as before.
TEST(Classifier, OutputBiasStartsAtTheGivenValues) {
  for (bool roformer : {false, true}) {
    nn::ParameterStore plain_store, store;
    models::BertClassifierOptions o = tiny(roformer, false, true);
    models::BertForSequenceClassification plain(o, plain_store);
    o.output_bias = {-1.5f, 0.25f, -4.0f};
    models::BertForSequenceClassification model(o, store);
    for (nn::ParameterStore* s : {&plain_store, &store}) {
      s->allocate(Device::cpu());
      s->initialize(4);
    }
    const std::string bias = roformer ? "classifier.out_proj.bias" : "classifier.bias";
    EXPECT_EQ(store.find(bias)->value.to_floats(), o.output_bias);
    EXPECT_EQ(plain_store.find(bias)->value.to_floats(), std::vector<float>(3, 0.0f));
    for (const auto& p : store.parameters())
      if (p->name != bias) {
        EXPECT_EQ(p->value.to_floats(), plain_store.find(p->name)->value.to_floats()) << p->name;
      }
  }
  models::BertClassifierOptions o = tiny(false, false, true);
  o.output_bias = {1.0f};
  nn::ParameterStore store;
  EXPECT_THROW(models::BertForSequenceClassification(o, store), Error);
}

TEST(Classifier, LossScaleScalesAndEveryParameterIsReportedOnce) {
  for (bool roformer : {false, true}) {
    nn::ParameterStore store;
    models::BertForSequenceClassification model(tiny(roformer, false), store);
    store.allocate(Device::cpu());
    store.initialize(4);
    const models::ClassificationBatch batch = tiny_batch(false);
    nn::Context ctx;
    ctx.training = true;
    ctx.seed = 1;
    store.zero_grad();
    model.forward_loss(batch, ctx);
    model.backward(1.0f);
    const std::vector<float> g1 = store.grads().to_floats();
    store.zero_grad();
    std::vector<std::pair<int64_t, int64_t>> ranges;
    ctx.grad_ready = [&](int64_t b, int64_t e) { ranges.emplace_back(b, e); };
    model.forward_loss(batch, ctx);
    model.backward(4.0f);
    const std::vector<float> g4 = store.grads().to_floats();
    for (size_t i = 0; i < g1.size(); ++i)
      ASSERT_NEAR(g4[i], 4.0f * g1[i], 1e-5f + 1e-4f * std::abs(g1[i])) << i;
    // Descending, back to back, covering the whole buffer once.
    ASSERT_FALSE(ranges.empty());
    EXPECT_EQ(ranges.front().second, store.numel());
    for (size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].second, ranges[i - 1].first);
    EXPECT_EQ(ranges.back().first, 0);
  }
}

// Binary cross-entropy stays finite and exact where the logits are far out
// (a naive log(sigmoid) gives inf at |z| ~ 90 in float, log(0) in double at
// ~750): the loss from logits of +-800 against one computed here, and
// gradients of (sigmoid - y) / C, 0 or +-1/3 per example.
TEST(Classifier, MultilabelLossIsStableForLargeLogits) {
  nn::ParameterStore store;
  models::BertForSequenceClassification model(tiny(true, false, true), store);
  store.allocate(Device::cpu());
  store.initialize(6);
  nn::Parameter* bias = store.find("classifier.out_proj.bias");
  nn::Parameter* weight = store.find("classifier.out_proj.weight");
  ASSERT_TRUE(bias && weight);
  for (int64_t i = 0; i < 3 * 16; ++i) weight->value.data<float>()[i] = 0.0f;
  const float zs[3] = {800.0f, -800.0f, 800.0f};
  for (int k = 0; k < 3; ++k) bias->value.data<float>()[k] = zs[k];
  const models::ClassificationBatch batch = tiny_batch(false, true);  // rows 101, 000, 010
  nn::Context ctx;
  std::vector<float> logits;
  store.zero_grad();
  const models::ClassificationSums s = model.forward_loss(batch, ctx, &logits);
  ASSERT_TRUE(std::isfinite(s.loss));
  // Wrong by 800 each: row 0 none, row 1 labels 0 and 2, row 2 labels 0, 1 and 2.
  EXPECT_NEAR(s.loss, 800.0 * (0 + 2 + 3) / 3.0, 1e-9);
  model.backward(1.0f);
  const std::vector<float> g = bias->grad.to_floats();
  // Summed over the rows: labels 0 and 2 are 1/3 too high in rows 1 and 2,
  // label 1 is 1/3 too low in row 2.
  EXPECT_NEAR(g[0], 2.0f / 3, 1e-6);
  EXPECT_NEAR(g[1], -1.0f / 3, 1e-6);
  EXPECT_NEAR(g[2], 2.0f / 3, 1e-6);
  for (float v : store.grads().to_floats()) ASSERT_TRUE(std::isfinite(v));
}

TEST(Classifier, BatchWithoutLabelsGivesLogitsOnly) {
  nn::ParameterStore store;
  models::BertForSequenceClassification model(tiny(false, false), store);
  store.allocate(Device::cpu());
  store.initialize(5);
  models::ClassificationBatch batch = tiny_batch(false);
  batch.labels = Tensor();
  nn::Context ctx;
  std::vector<float> logits;
  const models::ClassificationSums s = model.forward_loss(batch, ctx, &logits);
  EXPECT_EQ(s.examples, 0);
  EXPECT_EQ(s.loss, 0.0);
  EXPECT_EQ(logits.size(), 9u);
  EXPECT_THROW(model.backward(1.0f), Error);
  // Inference is deterministic (no dropout) and independent of the batch:
  // row 1 alone gives the same logits as in the batch of three.
  models::ClassificationBatch one;
  one.input_ids = Tensor::from_ints({5, 22, 6, 11, 6}, {1, 5});
  one.token_type_ids = Tensor::from_ints({0, 0, 0, 1, 1}, {1, 5});
  one.lengths = Tensor::from_ints({5}, {1});
  std::vector<float> alone;
  model.forward_loss(one, ctx, &alone);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(alone[k], logits[3 + k], 1e-5) << k;
}

}  // namespace
}  // namespace rotor
