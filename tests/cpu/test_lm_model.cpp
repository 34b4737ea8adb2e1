// The decoder-only causal LM of task lm (models/decoder_lm.h) and its data
// (data/lm.h): finite-difference gradients of the whole model under every
// registered position encoding, pre- and post-LN, tied and untied output;
// causality (position t's logits do not depend on tokens after t); the
// token stream, its blocks and their batches, shuffled and resumed exactly.
#include <cmath>
#include <functional>
#include <string>

#include "data/lm.h"
#include "models/decoder_lm.h"
#include "models/model_config.h"
#include "nn/position.h"
#include "support/model_gradcheck.h"
#include "support/packed_lm.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using test::jitter;

constexpr int64_t kVocab = 40;

models::DecoderLmOptions tiny_lm(nn::PositionKind position, bool pre_ln, bool tied,
                                 bool rms = false) {
  models::DecoderLmOptions o;
  o.vocab_size = kVocab;
  o.num_layers = 2;
  o.layer.d_model = 16;
  o.layer.n_heads = 2;
  o.layer.d_ff = 32;
  o.layer.activation = ops::Activation::GELU;
  o.layer.dropout = 0.1f;
  o.layer.attention_dropout = 0.1f;
  o.layer.post_norm = !pre_ln;
  o.layer.rms_norm = rms;
  o.position = position;
  o.max_positions = 16;
  o.share_embeddings = tied;
  return o;
}

// Two blocks of 7 inputs; the second ends early (right padding with 0).
models::LmBatch tiny_batch() {
  models::LmBatch b;
  b.input_ids = Tensor::from_ints({5, 12, 3, 30, 17, 4, 6, 8, 22, 3, 9, 0, 0, 0}, {2, 7});
  b.targets = Tensor::from_ints({12, 3, 30, 17, 4, 6, 11, 22, 3, 9, 7, 0, 0, 0}, {2, 7});
  b.tokens = 11;
  return b;
}

struct ModelCase {
  nn::PositionKind position;
  bool pre_ln, tied;
  const char* name;
  bool rms = false;    // RMSNorm (model.norm_type rms_norm)
  bool llama = false;  // and SwiGLU, no biases, 2 key/value heads of 4 (Llama's layer)
  friend void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }
};

models::DecoderLmOptions case_lm(const ModelCase& mc) {
  models::DecoderLmOptions o = tiny_lm(mc.position, mc.pre_ln, mc.tied, mc.rms);
  if (mc.llama) {
    o.layer.n_heads = 4;
    o.layer.kv_heads = 2;
    o.layer.activation = ops::Activation::SiLU;
    o.layer.gated_ffn = true;
    o.layer.bias = false;
  }
  return o;
}

class LmModelGrad : public ::testing::TestWithParam<ModelCase> {};

TEST_P(LmModelGrad, MatchesFiniteDifferences) {
  const ModelCase mc = GetParam();
  nn::ParameterStore store;
  models::DecoderLM model(case_lm(mc), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  jitter(store, 2, 0.1f);
  EXPECT_EQ(store.find("model.layers.0.fc1_gate.weight") != nullptr, mc.llama);
  EXPECT_EQ(store.find("model.layers.0.fc2.bias") == nullptr, mc.llama);
  if (mc.llama)  // 2 key/value heads of dimension 4
    EXPECT_EQ(store.find("model.layers.0.self_attn.k_proj.weight")->shape, (Shape{8, 16}));
  // RMSNorm has a weight and no bias.
  EXPECT_EQ(store.find("model.layers.0.final_layer_norm.bias") == nullptr, mc.rms);
  EXPECT_NE(store.find("model.layers.0.final_layer_norm.weight"), nullptr);
  nn::Parameter* emb = store.find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  for (int64_t j = 0; j < 16; ++j) emb->value.data<float>()[j] = 0.0f;  // the pad row
  EXPECT_EQ(store.find("lm_head.weight") == nullptr, mc.tied);
  EXPECT_EQ(store.find("model.layer_norm.weight") != nullptr, mc.pre_ln);
  EXPECT_EQ(store.find("model.embed_positions.weight") != nullptr, mc.position->learned_table);
  const models::LmBatch batch = tiny_batch();
  nn::Context ctx;
  ctx.training = true;  // dropout on: the same masks in every call (same step)
  ctx.seed = 3;
  ctx.micro_step = 2;
  auto objective = [&]() { return model.forward_loss(batch, ctx).loss; };
  store.zero_grad();
  const models::LmSums s = model.forward_loss(batch, ctx);
  EXPECT_EQ(s.tokens, 11);
  EXPECT_TRUE(std::isfinite(s.loss));
  model.backward(1.0f);
  // Without rotation the key bias shifts all of a query's scores alike
  // (softmax cancels it): exactly zero gradient, checked all the same.
  const int checked = test::check_model_gradients(store, objective, [&](const std::string& name) {
    return name.find("k_proj.bias") != std::string::npos && !mc.position->rotates_qk;
  });
  EXPECT_GT(checked, 0);
}

// Every registered encoding (pre-LN, tied), and post-LN and an untied output.
std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> cases;
  for (const nn::PositionKind& k : nn::position_kinds())
    if (!k->bert_encoder_only)  // TUPE, DeBERTa: the BERT encoder's alone
      cases.push_back({k, true, true, k->name.data()});
  cases.push_back({nn::PositionKind::Rope, false, true, "rope_post_ln"});
  cases.push_back({nn::PositionKind::Learned, true, false, "learned_untied"});
  cases.push_back({nn::PositionKind::Rope, true, true, "rope_rms_norm", true});
  cases.push_back({nn::PositionKind::Rope, false, false, "rope_post_ln_rms_norm", true});
  cases.push_back({nn::PositionKind::Rope, true, true, "rope_llama", true, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Positions, LmModelGrad, ::testing::ValuesIn(model_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Position t's logits depend on tokens 0..t only: changing the tokens after t
// changes nothing before it, and changing token t changes position t.
class LmCausal : public ::testing::TestWithParam<ModelCase> {};

TEST_P(LmCausal, LaterTokensDoNotChangeEarlierOutputs) {
  const ModelCase mc = GetParam();
  nn::ParameterStore store;
  models::DecoderLM model(tiny_lm(mc.position, mc.pre_ln, mc.tied), store);
  store.allocate(Device::cpu());
  store.initialize(4);
  jitter(store, 5, 0.1f);
  nn::Context ctx;  // inference: no dropout
  const std::vector<int32_t> a = {5, 12, 3, 30, 17, 4, 6, 8};
  const int64_t T = static_cast<int64_t>(a.size());
  const std::vector<float> base =
      model.forward_logits(Tensor::from_ints(a, {1, T}), ctx).to_floats();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> b = a;
    for (int64_t u = t; u < T; ++u) b[static_cast<size_t>(u)] = 7 + static_cast<int32_t>(u);
    const std::vector<float> changed =
        model.forward_logits(Tensor::from_ints(b, {1, T}), ctx).to_floats();
    for (int64_t u = 0; u < t; ++u)
      for (int64_t v = 0; v < kVocab; ++v)
        ASSERT_EQ(changed[static_cast<size_t>(u * kVocab + v)],
                  base[static_cast<size_t>(u * kVocab + v)])
            << "position " << u << " changed with the tokens from " << t;
    double diff = 0;
    for (int64_t v = 0; v < kVocab; ++v)
      diff += std::abs(changed[static_cast<size_t>(t * kVocab + v)] -
                       base[static_cast<size_t>(t * kVocab + v)]);
    EXPECT_GT(diff, 0.0) << "position " << t << " ignores its own token";
  }
}

INSTANTIATE_TEST_SUITE_P(Positions, LmCausal, ::testing::ValuesIn(model_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LmModel, InitialLossAndLogitsAgree) {
  nn::ParameterStore store;
  models::DecoderLM model(tiny_lm(nn::PositionKind::Rope, true, true), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  const models::LmBatch batch = tiny_batch();
  nn::Context ctx;
  const models::LmSums s = model.forward_loss(batch, ctx);
  EXPECT_TRUE(s.has_correct);  // counted when not training
  EXPECT_LE(s.correct, 11);
  // fairseq's init with a tied output: logits of about unit variance, so a
  // loss a little above log V.
  EXPECT_GT(s.loss / 11.0, std::log(static_cast<double>(kVocab)));
  EXPECT_LT(s.loss / 11.0, std::log(static_cast<double>(kVocab)) + 1.5);
  const std::vector<float> lg = model.forward_logits(batch.input_ids, ctx).to_floats();
  const std::vector<int32_t> tgt = batch.targets.to_ints();
  double loss = 0;
  for (size_t i = 0; i < tgt.size(); ++i) {
    if (tgt[i] == 0) continue;
    const float* row = lg.data() + i * kVocab;
    double mx = -1e30, z = 0;
    for (int j = 0; j < kVocab; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    for (int j = 0; j < kVocab; ++j) z += std::exp(row[j] - mx);
    loss += mx + std::log(z) - row[tgt[i]];
  }
  EXPECT_NEAR(loss, s.loss, 1e-4);
}

TEST(LmModel, OptionsFromConfig) {
  Config c;
  c.task = *task_kind("lm");
  c.model.decoder_layers = 3;
  c.model.encoder_layers = 7;
  c.model.norm = NormPlacement::Pre;
  c.model.share_embeddings = false;
  c.model.position = nn::PositionKind::Rope;
  const models::DecoderLmOptions o = models::lm_options(c, 99);
  EXPECT_EQ(o.num_layers, 3);
  EXPECT_EQ(o.vocab_size, 99);
  EXPECT_FALSE(o.layer.post_norm);
  EXPECT_TRUE(o.layer.rope);
  EXPECT_FALSE(o.share_embeddings);
}

// ---- data ------------------------------------------------------------------------

TEST(LmData, StreamBlocksAndTargets) {
  test::TempDir dir;
  // An empty sentence is skipped; a trailing </s> (3) is the end-of-text token.
  auto corpus = test::write_lm_corpus(dir, {{10, 11, 12}, {}, {20, 21, 3}, {30}});
  // Stream: 10 11 12 3 20 21 3 30 3 (9 tokens, 8 targets).
  data::LmBlocks train(corpus, 3, 3, false), eval(corpus, 3, 3, true);
  EXPECT_EQ(train.stream_tokens(), 9);
  EXPECT_EQ(train.size(), 2);  // full blocks only
  EXPECT_EQ(train.target_tokens(), 6);
  EXPECT_EQ(train.block(0), (std::vector<int32_t>{10, 11, 12, 3}));
  EXPECT_EQ(train.block(1), (std::vector<int32_t>{3, 20, 21, 3}));
  EXPECT_EQ(eval.size(), 3);  // and the last, shorter one
  EXPECT_EQ(eval.target_tokens(), 8);
  EXPECT_EQ(eval.block(2), (std::vector<int32_t>{3, 30, 3}));
  // Batches: inputs all but the last token, targets all but the first, pad 0.
  data::LmBatcherOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  data::LmBatcher batcher(std::make_shared<const data::LmBlocks>(eval), o);
  const data::LmHostBatch b = batcher.make_batch({1, 2});
  EXPECT_EQ(b.input_ids.to_ints(), (std::vector<int32_t>{3, 20, 21, 3, 30, 0}));
  EXPECT_EQ(b.targets.to_ints(), (std::vector<int32_t>{20, 21, 3, 30, 3, 0}));
  EXPECT_EQ(b.tokens, 5);
  EXPECT_THROW(data::LmBlocks(corpus, 9, 3, false), Error);  // no full block of 9 + 1
  EXPECT_THROW(data::LmBlocks(corpus, 0, 3, true), Error);
}

TEST(LmData, ShuffledPerEpochAndResumable) {
  test::TempDir dir;
  std::vector<std::vector<int32_t>> s;
  for (int i = 0; i < 40; ++i) s.push_back({10 + i % 50, 11 + i % 40, 12 + i % 30});
  auto blocks = std::make_shared<const data::LmBlocks>(test::write_lm_corpus(dir, s), 4, 3, false);
  ASSERT_EQ(blocks->size(), 39);  // 160 stream tokens, 159 targets
  data::LmBatcherOptions o;
  o.batch_size = 4;
  o.seed = 9;
  data::LmBatcher a(blocks, o), b(blocks, o);
  EXPECT_NE(a.epoch_plan(0), a.epoch_plan(1));  // shuffled anew every epoch
  o.seed = 10;
  EXPECT_NE(data::LmBatcher(blocks, o).epoch_plan(0), a.epoch_plan(0));  // by the run's seed
  for (int i = 0; i < 13; ++i) a.next();  // into the second epoch (9 batches each)
  b.set_position(a.position());
  for (int i = 0; i < 10; ++i) {
    const data::LmHostBatch x = a.next(), y = b.next();
    EXPECT_EQ(x.input_ids.to_ints(), y.input_ids.to_ints());
    EXPECT_EQ(x.targets.to_ints(), y.targets.to_ints());
  }
}

}  // namespace
}  // namespace rotor
