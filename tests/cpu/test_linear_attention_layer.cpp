// attention.kind linear in nn::MultiHeadAttention (nn/attention_kinds/linear.cpp):
// FAVOR+'s projection is a pure function of (seed, floor(update / redraw),
// layer) in training and frozen in evaluation; cross-attention stays softmax;
// the incremental decoder refuses the kind; a tiny masked LM with it trains.
// The gradients are checked in
// tests/cpu/test_nn_gradcheck.cpp, the op in tests/cpu/test_linear_attention.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_io.h"
#include "nn/attention.h"
#include "nn/attention_kind.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace rotor {
namespace {

using nn::Context;
using nn::ParameterStore;

const nn::AttentionKind kLinear = *nn::attention_kind("linear");

nn::MultiHeadAttentionOptions favor_options(uint64_t seed = 3) {
  nn::MultiHeadAttentionOptions o;
  o.d_model = 16;
  o.n_heads = 2;
  o.rope = true;
  o.kind = kLinear;
  o.linear.feature_map = ops::LinearFeatureMap::Favor;
  o.linear.feature_redraw = 1000;
  o.linear.seed = seed;
  return o;
}

Context context(bool training, uint64_t update, uint64_t step = 0, uint32_t rank = 0) {
  Context c;
  c.training = training;
  c.update = update;
  c.micro_step = step;
  c.rank = rank;
  c.seed = 11;  // the dropout seed: not the draw's
  return c;
}

// Two attention layers (layer ids 0 and 1) with the same weights.
struct TwoLayers {
  ParameterStore store;
  nn::MultiHeadAttention a, b;
  explicit TwoLayers(const nn::MultiHeadAttentionOptions& o)
      : a(store, {"a.q", "a.k", "a.v", "a.o"}, o, false),
        b(store, {"b.q", "b.k", "b.v", "b.o"}, o, false) {
    store.allocate(Device::cpu());
    store.initialize(7);
    // b's weights are a's: the layers differ by their id alone.
    float* v = store.values().data<float>();
    const int64_t half = store.numel() / 2;
    for (int64_t i = 0; i < half; ++i) v[half + i] = v[i];
  }
};

const Tensor& input() {
  static const Tensor x = test::random_tensor({2, 6, 16}, 21);
  return x;
}

std::vector<float> run(nn::MultiHeadAttention& m, const Context& ctx) {
  return m.forward(input(), Tensor(), Tensor(), ctx).to_floats();
}

TEST(LinearAttentionLayer, FavorDrawFollowsTheUpdateOverRedraw) {
  EXPECT_EQ(nn::feature_draw(1000, 999), 0u);
  EXPECT_EQ(nn::feature_draw(1000, 1000), 1u);
  EXPECT_EQ(nn::feature_draw(1000, 1500), 1u);
  EXPECT_EQ(nn::feature_draw(0, 123456), 0u);  // 0: never redrawn
  TwoLayers m(favor_options());
  const std::vector<float> at999 = run(m.a, context(true, 999));
  const std::vector<float> at1000 = run(m.a, context(true, 1000));
  // Another micro-batch, another rank, the same update: the same features.
  const std::vector<float> at1500 = run(m.a, context(true, 1500, 42, 3));
  EXPECT_NE(at999, at1000) << "a redraw at update 1000 must change the features";
  EXPECT_EQ(at1000, at1500) << "updates 1000 and 1500 share draw 1";
  EXPECT_EQ(run(m.a, context(true, 0)), at999);
  // The layer index keys the draw: the same weights at layer 1 draw others.
  EXPECT_NE(run(m.b, context(true, 1000)), at1000);
  // A fresh model (a resumed run, another rank) at update 1200 draws the same.
  TwoLayers fresh(favor_options());
  EXPECT_EQ(run(fresh.a, context(true, 1200, 5, 1)), at1000);
  // The run's seed keys it too.
  TwoLayers other_seed(favor_options(4));
  EXPECT_NE(run(other_seed.a, context(true, 1000)), at1000);
}

TEST(LinearAttentionLayer, EvaluationKeepsTheLastTrainingDraw) {
  TwoLayers m(favor_options());
  const std::vector<float> trained = run(m.a, context(true, 2500));  // draw 2
  // Evaluation contexts carry no update: the layer keeps its last draw.
  EXPECT_EQ(run(m.a, context(false, 0)), trained);
  // A layer that never trained in this process takes ctx.update's draw.
  TwoLayers fresh(favor_options());
  EXPECT_EQ(run(fresh.a, context(false, 2000)), trained);
  EXPECT_NE(run(fresh.b, context(false, 0)), trained);
}

TEST(LinearAttentionLayer, FeatureRedrawZeroNeverRedraws) {
  nn::MultiHeadAttentionOptions o = favor_options();
  o.linear.feature_redraw = 0;
  TwoLayers m(o);
  EXPECT_EQ(run(m.a, context(true, 0)), run(m.a, context(true, 1'000'000)));
}

TEST(LinearAttentionLayer, Elu1HasNoRandomFeatures) {
  nn::MultiHeadAttentionOptions o = favor_options();
  o.linear.feature_map = ops::LinearFeatureMap::Elu1;
  TwoLayers m(o);
  EXPECT_EQ(run(m.a, context(true, 0)), run(m.a, context(true, 5000)));
  EXPECT_EQ(run(m.a, context(true, 0)), run(m.b, context(true, 0)));
}

TEST(LinearAttentionLayer, CrossAttentionIsSoftmax) {
  auto cross = [](nn::AttentionKind kind) {
    ParameterStore store;
    nn::MultiHeadAttentionOptions o = favor_options();
    o.kind = kind;
    nn::MultiHeadAttention m(store, {"q", "k", "v", "o"}, o, true);
    store.allocate(Device::cpu());
    store.initialize(8);
    EXPECT_EQ(m.options().kind, nn::AttentionKind::Softmax);
    const Tensor memory = test::random_tensor({2, 5, 16}, 22);
    return m.forward(input(), memory, Tensor(), context(true, 0)).to_floats();
  };
  EXPECT_EQ(cross(kLinear), cross(nn::AttentionKind::Softmax));
}

TEST(LinearAttentionLayer, SelfAttentionDiffersFromSoftmax) {
  nn::MultiHeadAttentionOptions o = favor_options();
  TwoLayers linear(o);
  o.kind = nn::AttentionKind::Softmax;
  TwoLayers softmax(o);
  EXPECT_NE(run(linear.a, context(false, 0)), run(softmax.a, context(false, 0)));
}

TEST(LinearAttentionLayer, CachedDecodingStepRefusesIt) {
  nn::MultiHeadAttentionOptions o = favor_options();
  o.causal = true;
  ParameterStore store;
  nn::MultiHeadAttention m(store, {"q", "k", "v", "o"}, o, false);
  store.allocate(Device::cpu());
  store.initialize(9);
  nn::MultiHeadAttention::Cache cache;
  const Tensor x = test::random_tensor({1, 1, 16}, 23);
  try {
    m.step(x, Tensor(), Tensor(), cache, 0, 8, context(false, 0));
    FAIL() << "expected the step to refuse attention kind linear";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention kind linear has no incremental decoding step"),
              std::string::npos)
        << e.what();
  }
}

// `rotor train` of the tiny masked LM (tests/support/tiny_configs.h) with
// linear attention under RoPE: the training loss of its last updates is
// below that of its first ones, for elu1 and for FAVOR+ redrawn every 4
// updates.
TEST(LinearAttentionLayer, TinyMaskedLmTrains) {
  test::TempDir dir;
  const std::string d = dir.path();
  ASSERT_EQ(test::run_in(d, test::rotor_binary() + " " + test::synth_args("data")).code, 0);
  test::write_mlm_text(d + "/data", d + "/mlm.txt", d + "/mlm_valid.txt", 10);
  for (const char* map : {"elu1", "favor"}) {
    SCOPED_TRACE(map);
    const std::string run = std::string("run_") + map;
    test::TinyConfig config = test::tiny_mlm("mlm.txt", "mlm_valid.txt", run)
                                  .set("attention.kind", "linear")
                                  .set("attention.feature_map", map)
                                  .set("train.max_updates", "24")
                                  .set("train.valid_interval", "24")
                                  .set("train.save_interval", "0")
                                  .set("optim.lr", "3.0e-3");
    // elu1 has no random features to redraw (the key would be refused).
    if (std::string(map) == "favor") config.set("attention.feature_redraw", "4");
    config.write(d + "/" + run + ".yaml");
    const test::RunResult r = test::run_in(d, test::rotor_binary() + " train " + run + ".yaml");
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<double> loss;
    std::ifstream metrics(d + "/" + run + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const json_io::Json j = json_io::parse(line, "metrics.jsonl");
      if (j.at("split") == "train") loss.push_back(j.at("loss").get<double>());
    }
    ASSERT_EQ(loss.size(), 24u);
    double first = 0, last = 0;
    for (size_t i = 0; i < 4; ++i) first += loss[i] / 4, last += loss[loss.size() - 1 - i] / 4;
    EXPECT_LT(last, first - 0.2) << "first updates " << first << ", last " << last;
  }
}

}  // namespace
}  // namespace rotor
