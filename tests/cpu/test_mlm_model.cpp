// Finite-difference gradient checks of the BERT layer and the whole masked-LM
// model (learned, rope, none, sinusoidal positions), in fp32 the robust way:
// central differences on a scalar objective, tolerance 2e-3 + 2e-2 |analytic|,
// and every parameter must receive a non-zero gradient.
#include <cmath>
#include <functional>
#include <string>

#include "models/bert.h"
#include "models/model_config.h"
#include "nn/transformer_layers.h"
#include "ops/reduce.h"
#include "support/model_gradcheck.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using test::jitter;

constexpr double kStep = 5e-3;

// Every parameter but the key bias gets a gradient: without rotation the key
// bias only shifts all of a query's scores by one constant, which softmax
// cancels (rotor gives it exactly zero gradient; its elements are still
// checked, against finite differences of ~0).
int check_params(nn::ParameterStore& store, const std::function<double()>& objective) {
  return test::check_model_gradients(store, objective, [](const std::string& name) {
    return name.find("attention.self.key.bias") != std::string::npos;
  });
}

nn::LayerOptions tiny_layer(bool rope) {
  nn::LayerOptions c = models::bert_base_layer();
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.layer_norm_eps = 1e-12f;
  c.rope = rope;
  c.normal_init_std = 0.3;
  return c;
}

class BertLayerGrad : public ::testing::TestWithParam<bool> {};

TEST_P(BertLayerGrad, MatchesFiniteDifferences) {
  const bool rope = GetParam();
  nn::ParameterStore store;
  nn::EncoderLayer layer(store, models::bert_layer_names("bert.encoder.layer.0"), tiny_layer(rope));
  store.allocate(Device::cpu());
  store.initialize(3);
  jitter(store, 11, 0.1f);
  const int64_t B = 2, T = 5, d = 16;
  Tensor x = test::random_tensor({B, T, d}, 5);
  Tensor w = test::random_tensor({B, T, d}, 6);
  Tensor lengths = Tensor::from_ints({5, 3}, {B});
  nn::Context ctx;
  ctx.training = true;  // dropout on: the same masks in every call (same step)
  ctx.seed = 9;
  ctx.micro_step = 4;
  const std::vector<float> wv = w.to_floats();
  auto objective = [&]() {
    Tensor y = layer.forward(x, lengths, ctx);
    std::vector<float> yv = y.to_floats();
    double s = 0;
    for (size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(wv[i]) * yv[i];
    return s;
  };
  store.zero_grad();
  objective();
  Tensor dx = layer.backward(w);
  const std::vector<float> dxv = dx.to_floats();
  EXPECT_GT(check_params(store, objective), 0);
  // The input gradient.
  float* xv = x.data<float>();
  for (int64_t i = 0; i < B * T * d; i += 7) {
    const float x0 = xv[i];
    xv[i] = x0 + static_cast<float>(kStep);
    const double fp = objective();
    xv[i] = x0 - static_cast<float>(kStep);
    const double fm = objective();
    xv[i] = x0;
    const double numeric = (fp - fm) / (2 * kStep);
    EXPECT_NEAR(dxv[static_cast<size_t>(i)], numeric,
                2e-3 + 2e-2 * std::abs(dxv[static_cast<size_t>(i)]))
        << "dx[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Positions, BertLayerGrad, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "rope" : "plain"; });

models::BertOptions tiny_model(nn::PositionKind position, int64_t type_vocab = 2) {
  models::BertOptions c;
  c.vocab_size = 40;
  c.num_layers = 2;
  c.layer = tiny_layer(false);
  c.position = position;
  c.max_positions = 16;
  c.type_vocab_size = type_vocab;
  c.init_std = 0.3;
  return c;
}

// Two rows (the second padded), token types, 5 masked positions.
models::MlmBatch tiny_batch() {
  models::MlmBatch b;
  const int64_t B = 2, T = 7;
  b.input_ids = Tensor::from_ints({5, 12, 4, 30, 17, 4, 6, 5, 22, 4, 9, 6, 0, 0}, {B, T});
  b.token_type_ids = Tensor::from_ints({0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0}, {B, T});
  b.lengths = Tensor::from_ints({7, 5}, {B});
  b.masked_positions = Tensor::from_ints({2, 3, 5, 9, 10}, {5});
  b.masked_targets = Tensor::from_ints({13, 30, 25, 39, 9}, {5});
  b.tokens = 12;
  b.masked_tokens = 5;
  return b;
}

struct ModelCase {
  nn::PositionKind position;
  int64_t type_vocab;
  const char* name;
  bool tupe_relative = false;  // TUPE-R: T5's bias besides TUPE's correlation
  bool rms = false;            // RMSNorm for every norm (model.norm_type rms_norm)
};

class MlmModelGrad : public ::testing::TestWithParam<ModelCase> {};

TEST_P(MlmModelGrad, MatchesFiniteDifferences) {
  const ModelCase mc = GetParam();
  nn::ParameterStore store;
  models::BertOptions options = tiny_model(mc.position, mc.type_vocab);
  options.tupe_relative = mc.tupe_relative;
  options.layer.rms_norm = mc.rms;
  options.layer.t5_buckets = 8;  // few buckets: most of them in use at 7 tokens
  options.layer.t5_max_distance = 12;
  options.deberta = {4, 6};  // DeBERTa: exact within 2, log-spaced to 6, 8 rows
  models::BertForMaskedLM model(options, store);
  EXPECT_EQ(store.find("cls.predictions.transform.LayerNorm.bias") == nullptr, mc.rms);
  store.allocate(Device::cpu());
  store.initialize(1);
  jitter(store, 2, 0.1f);  // TUPE's [CLS] scalars start at 0: jittered off it
  // Keep the embedding pad row zero, as the model's init does.
  nn::Parameter* word = store.find(model.options().prefix() + ".embeddings.word_embeddings.weight");
  ASSERT_NE(word, nullptr);
  for (int64_t j = 0; j < 16; ++j) word->value.data<float>()[j] = 0.0f;
  const models::MlmBatch batch = tiny_batch();
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 3;
  ctx.micro_step = 2;
  auto objective = [&]() { return model.forward_loss(batch, ctx).loss; };
  store.zero_grad();
  const models::MlmSums s = model.forward_loss(batch, ctx);
  EXPECT_EQ(s.tokens, 5);
  EXPECT_TRUE(s.has_correct);
  EXPECT_GE(s.correct, 0);
  EXPECT_LE(s.correct, 5);
  EXPECT_TRUE(std::isfinite(s.loss));
  model.backward(1.0f);
  EXPECT_GT(check_params(store, objective), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Positions, MlmModelGrad,
    ::testing::Values(ModelCase{nn::PositionKind::Learned, 2, "learned"},
                      ModelCase{nn::PositionKind::Rope, 2, "rope"},
                      ModelCase{nn::PositionKind::None, 2, "none"},
                      ModelCase{*nn::position_kind("t5"), 2, "t5"},
                      ModelCase{*nn::position_kind("transformer_xl"), 2, "transformer_xl"},
                      ModelCase{*nn::position_kind("tupe"), 2, "tupe"},
                      ModelCase{*nn::position_kind("tupe"), 2, "tupe_r", true},
                      ModelCase{*nn::position_kind("deberta"), 2, "deberta"},
                      ModelCase{nn::PositionKind::Sinusoidal, 0, "sinusoidal_no_types"},
                      ModelCase{nn::PositionKind::Rope, 2, "rope_rms_norm", false, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MlmModel, LossScaleScalesGradients) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(tiny_model(nn::PositionKind::Rope), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  nn::Context ctx;
  store.zero_grad();
  model.forward_loss(tiny_batch(), ctx);
  model.backward(1.0f);
  const std::vector<float> g1 = store.grads().to_floats();
  store.zero_grad();
  model.forward_loss(tiny_batch(), ctx);
  model.backward(0.25f);
  const std::vector<float> g2 = store.grads().to_floats();
  for (size_t i = 0; i < g1.size(); i += 13)
    EXPECT_NEAR(g2[i], 0.25f * g1[i], 1e-6f + 1e-4f * std::abs(g1[i]));
}

TEST(MlmModel, InitialLossIsLogVocabAndLogitsAgree) {
  models::BertOptions c = tiny_model(nn::PositionKind::Learned);
  c.init_std = 0.02;  // BERT's init: near-uniform predictions
  nn::ParameterStore store;
  models::BertForMaskedLM model(c, store);
  store.allocate(Device::cpu());
  store.initialize(1);
  // BERT init: LN 1/0, biases 0, pad row 0, weights N(0, 0.02).
  EXPECT_EQ(
      store.find("bert.encoder.layer.0.attention.output.LayerNorm.weight")->value.to_floats()[0],
      1.0f);
  EXPECT_EQ(ops::max_abs(store.find("bert.encoder.layer.1.intermediate.dense.bias")->value), 0.0f);
  EXPECT_EQ(ops::max_abs(store.find("bert.embeddings.word_embeddings.weight")->value.narrow(0, 1)),
            0.0f);
  const float wq =
      ops::max_abs(store.find("bert.encoder.layer.0.attention.self.query.weight")->value);
  EXPECT_GT(wq, 0.02f);
  EXPECT_LT(wq, 0.2f);  // N(0, 0.02), not Xavier
  const models::MlmBatch batch = tiny_batch();
  nn::Context ctx;
  const models::MlmSums s = model.forward_loss(batch, ctx);
  EXPECT_NEAR(s.loss / 5.0, std::log(40.0), 0.05);
  // forward_logits at the masked positions gives the same loss.
  Tensor lg = model.forward_logits(batch.input_ids, batch.token_type_ids, batch.lengths, ctx);
  ASSERT_EQ(lg.shape(), (Shape{2, 7, 40}));
  const std::vector<float> v = lg.to_floats();
  const std::vector<int32_t> pos = batch.masked_positions.to_ints(),
                             tgt = batch.masked_targets.to_ints();
  double loss = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    const float* row = v.data() + static_cast<size_t>(pos[i]) * 40;
    double mx = -1e30, z = 0;
    for (int j = 0; j < 40; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    for (int j = 0; j < 40; ++j) z += std::exp(row[j] - mx);
    loss += mx + std::log(z) - row[tgt[i]];
  }
  EXPECT_NEAR(loss, s.loss, 1e-4);
}

TEST(MlmModel, NoMaskedTokens) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(tiny_model(nn::PositionKind::Rope), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  models::MlmBatch b = tiny_batch();
  b.masked_positions = Tensor::from_ints({}, {0});
  b.masked_targets = Tensor::from_ints({}, {0});
  b.masked_tokens = 0;
  nn::Context ctx;
  store.zero_grad();
  const models::MlmSums s = model.forward_loss(b, ctx);
  EXPECT_EQ(s.tokens, 0);
  EXPECT_EQ(s.loss, 0.0);
  model.backward(1.0f);
  EXPECT_EQ(ops::max_abs(store.grads()), 0.0f);
}

TEST(MlmModel, PreLnIsRejected) {
  Config c;
  c.task = *task_kind("mlm");
  c.model.norm = NormPlacement::Pre;
  // The config's checks refuse it (before a run touches its directory); the
  // model's options still refuse what slipped past them.
  try {
    validate(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "model.norm: task mlm builds BERT/RoFormer, which are post-LN; got pre");
  }
  EXPECT_ANY_THROW(models::bert_options(c, 100));
}

}  // namespace
}  // namespace rotor
