// Time2Vec ages (model.age_embedding time2vec, nn/time2vec.h): the features
// are w_0 tau + b_0 and sin(w_i tau + b_i) of tau = age id / age range,
// projected to d_model; the EHR encoder with them instead of the age table
// has gradients (w, b, the projection and everything else) that match finite
// differences; ages that differ give different outputs; the config needs
// model.age_vocab_size.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/config.h"
#include "models/bert.h"
#include "nn/time2vec.h"
#include "support/model_gradcheck.h"
#include "support/test_util.h"

namespace rotor {
namespace {

TEST(Time2Vec, FeaturesAreALinearAndPeriodicFunctionOfAge) {
  nn::ParameterStore store;
  nn::Time2Vec t2v(store, "t2v", 2, 10, 3, 0.02);  // k = 2, ages / 10, d = 3
  store.allocate(Device::cpu());
  store.initialize(1);
  const std::vector<float> w = {0.5f, 2.0f, -7.0f}, b = {0.1f, 0.3f, 1.0f};
  // projection: d x (k + 1), rows pick f_0, f_1, f_2 + f_0; bias 0.
  const std::vector<float> proj = {1, 0, 0, 0, 1, 0, 1, 0, 1}, zero = {0, 0, 0};
  auto set = [&](const std::string& name, const std::vector<float>& v) {
    nn::Parameter* p = store.find(name);
    ASSERT_NE(p, nullptr) << name;
    p->value.copy_from(Tensor::from_floats(v, p->shape));
  };
  set("t2v.weight", w);
  set("t2v.bias", b);
  set("t2v.projection.weight", proj);
  set("t2v.projection.bias", zero);
  const std::vector<int32_t> ages = {0, 3, 9};
  nn::Context ctx;
  const std::vector<float> y = t2v.forward(Tensor::from_ints(ages, {3}), ctx).to_floats();
  ASSERT_EQ(y.size(), 9u);
  for (size_t t = 0; t < ages.size(); ++t) {
    const double tau = ages[t] / 10.0;
    const double f0 = w[0] * tau + b[0], f1 = std::sin(w[1] * tau + b[1]),
                 f2 = std::sin(w[2] * tau + b[2]);
    EXPECT_NEAR(y[t * 3 + 0], f0, 1e-5) << t;
    EXPECT_NEAR(y[t * 3 + 1], f1, 1e-5) << t;
    EXPECT_NEAR(y[t * 3 + 2], f2 + f0, 1e-5) << t;
  }
}

models::BertOptions time2vec_model() {
  models::BertOptions c;
  c.vocab_size = 20;
  c.num_layers = 1;
  c.layer = models::bert_base_layer();
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.0f;
  c.layer.attention_dropout = 0.0f;
  c.position = nn::PositionKind::Learned;
  c.max_positions = 16;
  c.type_vocab_size = 2;
  c.age_vocab_size = 12;
  c.age_time2vec = 4;
  c.visit_positions = true;
  c.init_std = 0.3;
  return c;
}

// One patient: [CLS] 7 8 [SEP] 10 11 [SEP] at ages 3, 3, 3, 3, 7, 7, 7.
models::MlmBatch patient(std::vector<int32_t> ages = {3, 3, 3, 3, 7, 7, 7}) {
  models::MlmBatch batch;
  batch.input_ids = Tensor::from_ints({5, 7, 8, 6, 10, 11, 6}, {1, 7});
  batch.token_type_ids = Tensor::from_ints({0, 0, 0, 0, 1, 1, 1}, {1, 7});
  batch.age_ids = Tensor::from_ints(ages, {1, 7});
  batch.position_ids = Tensor::from_ints({0, 0, 0, 0, 1, 1, 1}, {1, 7});
  batch.lengths = Tensor::from_ints({7}, {1});
  batch.masked_positions = Tensor::from_ints({1, 4, 5}, {3});
  batch.masked_targets = Tensor::from_ints({8, 10, 13}, {3});
  batch.tokens = 7;
  batch.masked_tokens = 3;
  return batch;
}

TEST(Time2Vec, EncoderGradientsMatchFiniteDifferences) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(time2vec_model(), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  test::jitter(store, 2, 0.1f);
  // No age table: the Time2Vec parameters instead.
  const std::string p = model.options().prefix() + ".embeddings.";
  EXPECT_EQ(store.find(p + "age_embeddings.weight"), nullptr);
  for (const char* name : {"age_time2vec.weight", "age_time2vec.bias",
                           "age_time2vec.projection.weight", "age_time2vec.projection.bias"})
    EXPECT_NE(store.find(p + name), nullptr) << name;
  const models::MlmBatch batch = patient();
  nn::Context ctx;
  ctx.training = true;
  auto objective = [&]() { return model.forward_loss(batch, ctx).loss; };
  store.zero_grad();
  model.forward_loss(batch, ctx);
  model.backward(1.0f);
  const int checked = test::check_model_gradients(store, objective, [](const std::string& name) {
    // The key bias (softmax cancels it) and the rows of unused positions.
    return name.find("key.bias") != std::string::npos ||
           name.find("position_embeddings") != std::string::npos;
  });
  EXPECT_GT(checked, 0);
  // Every Time2Vec weight and bias gets a gradient.
  for (const char* name : {"age_time2vec.weight", "age_time2vec.bias"})
    for (float g : store.find(p + name)->grad.to_floats()) EXPECT_NE(g, 0.0f) << name;

  // The ages reach the outputs.
  const double loss = objective();
  EXPECT_NE(model.forward_loss(patient({3, 3, 3, 3, 8, 8, 8}), ctx).loss, loss);
}

TEST(Time2Vec, ConfigNeedsAgeVocabSize) {
  const std::string text = "task: mlm\ndata:\n  format: ehr\nmodel:\n  age_embedding: time2vec\n";
  try {
    validate(load_config_from_string(text));
    ADD_FAILURE() << "time2vec without model.age_vocab_size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.age_embedding"), std::string::npos) << e.what();
  }
  const Config c = load_config_from_string(text + "  age_vocab_size: 128\n  time2vec_dim: 4\n");
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(c.model.age_embedding, AgeEmbedding::Time2Vec);
  EXPECT_EQ(c.model.time2vec_dim, 4);
}

}  // namespace
}  // namespace rotor
