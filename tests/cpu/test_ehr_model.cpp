// The encoder on EHR inputs: age and segment embeddings and visit positions
// (model.position_source visit) for learned, sinusoidal and rotary
// positions. With visit positions, shuffling the codes inside a visit
// shuffles the outputs the same way and changes nothing else; with token
// positions it does not. Gradients (age table, positions gathered by visit,
// RoPE at explicit positions) match finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/ehr.h"
#include "data/ehr_mlm.h"
#include "models/bert.h"
#include "ops/heads.h"
#include "support/model_gradcheck.h"
#include "support/test_util.h"

namespace rotor {
namespace {

models::BertOptions ehr_model(nn::PositionKind position, bool visits) {
  models::BertOptions c;
  c.vocab_size = 20;
  c.num_layers = 2;
  c.layer = models::bert_base_layer();
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.0f;
  c.layer.attention_dropout = 0.0f;
  c.position = position;
  c.max_positions = 16;
  c.type_vocab_size = 2;
  c.age_vocab_size = 12;
  c.visit_positions = visits;
  c.init_std = 0.3;
  return c;
}

// One patient: [CLS] 7 8 9 [SEP] 10 11 [SEP] at ages 3, 3, 3, 3, 3, 5, 5, 5.
struct Inputs {
  std::vector<int32_t> codes = {5, 7, 8, 9, 6, 10, 11, 6};
  std::vector<int32_t> ages = {3, 3, 3, 3, 3, 5, 5, 5};
  std::vector<int32_t> segments = {0, 0, 0, 0, 0, 1, 1, 1};
  std::vector<int32_t> visits = {0, 0, 0, 0, 0, 1, 1, 1};
  models::EncoderInputs tensors() const {
    const int64_t T = static_cast<int64_t>(codes.size());
    return {Tensor::from_ints(codes, {1, T}), Tensor::from_ints(segments, {1, T}), Tensor(),
            Tensor::from_ints(ages, {1, T}),  Tensor::from_ints(visits, {1, T}),   {}};
  }
};

struct Case {
  nn::PositionKind position;
  const char* name;
};

class EhrVisitPositions : public ::testing::TestWithParam<Case> {};

// The logits of `in` with the model of `options` (weights from one seed).
std::vector<float> logits(const models::BertOptions& options, const Inputs& in) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(options, store);
  store.allocate(Device::cpu());
  store.initialize(7);
  nn::Context ctx;
  return model.forward_logits(in.tensors(), ctx).to_floats();
}

TEST_P(EhrVisitPositions, ShufflingCodesInAVisitShufflesTheOutputs) {
  const int64_t V = 20;
  const Inputs a;
  Inputs b = a;
  // Visit 0's codes 7 8 9 (tokens 1..3) become 9 7 8: token 1 <- 3, 2 <- 1, 3 <- 2.
  const int perm[8] = {0, 3, 1, 2, 4, 5, 6, 7};
  for (int t = 0; t < 8; ++t) b.codes[t] = a.codes[perm[t]];
  const auto va = logits(ehr_model(GetParam().position, true), a);
  const auto vb = logits(ehr_model(GetParam().position, true), b);
  double worst = 0;
  for (int t = 0; t < 8; ++t)
    for (int64_t v = 0; v < V; ++v)
      worst = std::max(worst, std::abs(static_cast<double>(vb[t * V + v]) - va[perm[t] * V + v]));
  EXPECT_LT(worst, 1e-4);
  // Counting tokens instead, the same shuffle changes the outputs.
  const auto ta = logits(ehr_model(GetParam().position, false), a);
  const auto tb = logits(ehr_model(GetParam().position, false), b);
  double moved = 0;
  for (int t = 0; t < 8; ++t)
    for (int64_t v = 0; v < V; ++v)
      moved = std::max(moved, std::abs(static_cast<double>(tb[t * V + v]) - ta[perm[t] * V + v]));
  EXPECT_GT(moved, 1e-3);
}

TEST_P(EhrVisitPositions, GradientsMatchFiniteDifferences) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(ehr_model(GetParam().position, true), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  test::jitter(store, 2, 0.1f);
  const models::EncoderInputs in = Inputs().tensors();
  models::MlmBatch batch;
  batch.input_ids = in.input_ids;
  batch.token_type_ids = in.token_type_ids;
  batch.age_ids = in.age_ids;
  batch.position_ids = in.position_ids;
  batch.lengths = Tensor::from_ints({8}, {1});
  batch.masked_positions = Tensor::from_ints({2, 5, 6}, {3});
  batch.masked_targets = Tensor::from_ints({8, 10, 13}, {3});
  batch.tokens = 8;
  batch.masked_tokens = 3;
  nn::Context ctx;
  ctx.training = true;
  auto objective = [&]() { return model.forward_loss(batch, ctx).loss; };
  store.zero_grad();
  model.forward_loss(batch, ctx);
  model.backward(1.0f);
  EXPECT_GT(test::check_model_gradients(store, objective,
                                        [](const std::string& name) {
                                          // The key bias (softmax cancels it) and the
                                          // rows of unused positions and ages.
                                          return name.find("key.bias") != std::string::npos ||
                                                 name.find("position_embeddings") !=
                                                     std::string::npos ||
                                                 name.find("age_embeddings") != std::string::npos;
                                        }),
            0);
  // The age rows used get gradients; the others none.
  const nn::Parameter* age =
      store.find(model.options().prefix() + ".embeddings.age_embeddings.weight");
  ASSERT_NE(age, nullptr);
  const std::vector<float> g = age->grad.to_floats();
  auto row_norm = [&](int r) {
    double s = 0;
    for (int j = 0; j < 16; ++j) s += std::abs(g[r * 16 + j]);
    return s;
  };
  EXPECT_GT(row_norm(3), 0);
  EXPECT_GT(row_norm(5), 0);
  EXPECT_EQ(row_norm(4), 0);
}

INSTANTIATE_TEST_SUITE_P(Positions, EhrVisitPositions,
                         ::testing::Values(Case{nn::PositionKind::Learned, "learned"},
                                           Case{nn::PositionKind::Sinusoidal, "sinusoidal"},
                                           Case{nn::PositionKind::Rope, "rope"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(EhrVisitPositions, MissingInputsAreErrors) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(ehr_model(nn::PositionKind::Learned, true), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  models::EncoderInputs in = Inputs().tensors();
  in.position_ids = Tensor();
  EXPECT_THROW(model.forward_logits(in, nn::Context()), Error);
  in = Inputs().tensors();
  in.age_ids = Tensor();
  EXPECT_THROW(model.forward_logits(in, nn::Context()), Error);
  in = Inputs().tensors();
  in.position_ids = Tensor::from_ints({0, 0, 0, 0, 0, 16, 16, 16}, {1, 8});  // past max_positions
  EXPECT_THROW(model.forward_logits(in, nn::Context()), Error);
}

// Explicit positions t + offset rotate exactly as the offset does.
TEST(EhrVisitPositions, HeadSplitExplicitPositionsMatchOffsets) {
  const int64_t B = 2, T = 3, H = 2, D = 4;
  Tensor x = test::random_tensor({B, T, 3 * H * D}, 5);
  ops::SplitHeadsOptions o;
  o.n_heads = H;
  o.rope_parts = 2;
  o.position_offset = 4;
  std::vector<Tensor> a{Tensor::empty({B, H, T, D}, DType::F32, Device::cpu()),
                        Tensor::empty({B, H, T, D}, DType::F32, Device::cpu()),
                        Tensor::empty({B, H, T, D}, DType::F32, Device::cpu())};
  std::vector<Tensor> b{Tensor::empty({B, H, T, D}, DType::F32, Device::cpu()),
                        Tensor::empty({B, H, T, D}, DType::F32, Device::cpu()),
                        Tensor::empty({B, H, T, D}, DType::F32, Device::cpu())};
  ops::split_heads_forward(x, a, o);
  const std::vector<int32_t> positions = {4, 5, 6, 4, 5, 6};
  o.position_offset = 0;
  o.positions = &positions;
  ops::split_heads_forward(x, b, o);
  for (int p = 0; p < 3; ++p) EXPECT_EQ(a[p].to_floats(), b[p].to_floats()) << p;
  const std::vector<int32_t> short_list = {1, 2};
  o.positions = &short_list;
  EXPECT_THROW(ops::split_heads_forward(x, b, o), Error);
}

}  // namespace
}  // namespace rotor
