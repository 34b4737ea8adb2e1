// Activation checkpointing (train.checkpoint_activations, nn/recompute.h):
//   - the gradients and the loss are bitwise those of the plain run, for every
//     model family (translation, mlm, classification, lm), with dropout on
//     (the recompute draws the same masks), rope and learned positions,
//     softmax and linear attention (FAVOR+ with a redraw every update: the
//     recompute uses the same features), in f32 and bf16; EHR inputs (ages,
//     segments, BEHRT's visit positions: model.position_source visit) for
//     the masked LM and the multi-label classifier, with learned and rotary
//     positions (the recompute rotates at the same explicit positions);
//     Transformer-XL, TUPE and DeBERTa in 16 bits (their f32 terms); RMSNorm
//     (model.norm_type rms_norm) in the LM and the masked LM; over two
//     micro-batches accumulating into the same gradients, reported to
//     Context::grad_ready at the same points;
//   - the memory a forward and backward hold above what was held before
//     (the allocator's statistics) grows with the layers much more slowly
//     with checkpointing than without, and is lower for a model of several
//     layers;
//   - through the binary: a run with it logs it and trains to the same
//     metrics and the same weights; a run resumed with it from a run without
//     it ends where the uninterrupted run without it ends;
//   - `rotor bench train --compare-checkpointing` reports both runs and what
//     checkpointing saves.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "core/allocator.h"
#include "core/json_io.h"
#include "models/model_config.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace rotor {
namespace {

namespace fs = std::filesystem;
using test::run_rotor;
using test::RunResult;
using test::slurp;
using test::TempDir;

constexpr int64_t kVocab = 40;

// EhrMlm, EhrMultilabel: the masked LM and the multi-label classifier on EHR
// inputs with visit positions.
enum class Family { Translation, Mlm, Classification, Lm, EhrMlm, EhrMultilabel };

struct Case {
  Family family;
  nn::PositionKind position;
  bool linear;  // attention.kind linear (FAVOR+); else softmax
  DType dtype;
  const char* name;
  bool rms = false;  // model.norm_type rms_norm
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

// A tiny model of three layers (per stack) with every dropout on.
Config tiny_config(const Case& k, bool checkpoint, int layers = 3) {
  Config c;
  c.seed = 7;
  c.model.encoder_layers = layers;
  c.model.decoder_layers = layers;
  c.model.d_model = 16;
  c.model.n_heads = 2;
  c.model.d_ff = 32;
  c.model.activation = ops::Activation::GELU;
  c.model.dropout = 0.1;
  c.model.activation_dropout = 0.1;
  c.model.attention_dropout = k.linear ? 0.0 : 0.1;  // linear attention has no probabilities
  if (k.rms) c.model.norm_type = NormType::RmsNorm;
  // BERT/RoFormer are post-LN; the others run pre-LN here.
  const bool ehr = k.family == Family::EhrMlm || k.family == Family::EhrMultilabel;
  const bool bert = k.family == Family::Mlm || k.family == Family::Classification || ehr;
  c.model.norm = bert ? NormPlacement::Post : NormPlacement::Pre;
  c.model.position = k.position;
  c.model.max_positions = 32;
  if (k.linear) {
    c.attention.kind = *nn::attention_kind("linear");
    c.attention.feature_map = ops::LinearFeatureMap::Favor;
    c.attention.features = 8;
    c.attention.feature_redraw = 1;  // a new draw at every update
    c.attention.linear_rope = ops::LinearRope::BeforeFeatureMap;
  }
  c.data.labels = {"a", "b", "c"};
  if (ehr) {
    c.task = k.family == Family::EhrMlm ? *task_kind("mlm") : *task_kind("multilabel");
    c.data.format = DataFormat::Ehr;
    c.model.position_source = PositionSource::Visit;
    c.model.age_vocab_size = 16;
    c.model.type_vocab_size = 2;
  }
  c.train.checkpoint_activations = checkpoint;
  return c;
}

// What one training micro-batch (or two) left: the summed loss, every
// gradient of the flat buffer, and the ranges the backward reported to
// Context::grad_ready (data-parallel bucketing) in their order.
struct Outcome {
  double loss = 0;
  std::vector<float> grads;
  std::vector<std::pair<int64_t, int64_t>> ready;
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Right padding: row 1 is shorter.
Tensor ids(int64_t T, int64_t real1, int salt) {
  std::vector<int32_t> v;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t)
      v.push_back(b == 1 && t >= real1 ? 0
                                       : static_cast<int32_t>(1 + (t * 7 + b * 13 + salt) % 39));
  return Tensor::from_ints(v, {2, T});
}

// EHR channels of `ids(T, ...)`: three tokens per visit (visit t / 3, [CLS]
// sharing visit 0), segment = visit mod 2, an age per visit; i32 [2, T] each.
struct EhrChannels {
  Tensor types, ages, positions;
};
EhrChannels ehr_channels(int64_t T, int salt) {
  std::vector<int32_t> types, ages, visits;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t v = static_cast<int32_t>(t / 3);
      visits.push_back(v);
      types.push_back(v % 2);
      ages.push_back(static_cast<int32_t>((3 + 2 * v + b + salt) % 16));
    }
  return {Tensor::from_ints(types, {2, T}), Tensor::from_ints(ages, {2, T}),
          Tensor::from_ints(visits, {2, T})};
}

// `micro_batches` forward and backward passes of the family's model at
// ctx.micro_step = first_step, first_step + 1, ... (update 2), accumulating into one
// set of gradients, as one update with update_freq does.
Outcome train(const Case& k, bool checkpoint, uint64_t first_step, int micro_batches = 2) {
  const Config c = tiny_config(k, checkpoint);
  nn::ParameterStore store;
  std::unique_ptr<models::EncoderDecoder> translation;
  std::unique_ptr<models::BertForMaskedLM> mlm;
  std::unique_ptr<models::BertForSequenceClassification> cls;
  std::unique_ptr<models::DecoderLM> lm;
  switch (k.family) {
    case Family::Translation:
      translation =
          std::make_unique<models::EncoderDecoder>(models::transformer_options(c, kVocab), store);
      break;
    case Family::Mlm:
    case Family::EhrMlm:
      mlm = std::make_unique<models::BertForMaskedLM>(models::bert_options(c, kVocab), store);
      break;
    case Family::Classification:
    case Family::EhrMultilabel:
      cls = std::make_unique<models::BertForSequenceClassification>(
          models::bert_classifier_options(c, kVocab), store);
      break;
    case Family::Lm:
      lm = std::make_unique<models::DecoderLM>(models::lm_options(c, kVocab), store);
      break;
  }
  store.allocate(Device::cpu());
  store.initialize(static_cast<uint64_t>(c.seed));
  if (k.dtype != DType::F32) store.set_compute_dtype(k.dtype);
  store.zero_grad();
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = static_cast<uint64_t>(c.seed);
  ctx.dtype = k.dtype;
  ctx.update = 2;
  Outcome out;
  ctx.grad_ready = [&out](int64_t begin, int64_t end) { out.ready.emplace_back(begin, end); };
  const Tensor lengths = Tensor::from_ints({8, 5}, {2});  // i32 [B]
  for (int m = 0; m < micro_batches; ++m) {
    ctx.micro_step = first_step + static_cast<uint64_t>(m);
    const Tensor x = ids(8, 5, m);  // i32 [B, T]
    switch (k.family) {
      case Family::Translation: {
        models::TranslationBatch b;
        b.src = x;
        b.src_lengths = lengths;
        b.tgt_in = ids(6, 4, m + 3);
        b.tgt_out = ids(6, 4, m + 5);
        b.tgt_tokens = 10;
        b.src_tokens = 13;
        out.loss += translation->forward_loss(b, 0.1f, ctx).loss;
        translation->backward(4.0f);
        break;
      }
      case Family::Mlm: {
        models::MlmBatch b;
        b.input_ids = x;
        b.lengths = lengths;
        b.masked_positions = Tensor::from_ints({1, 4, 6, 9, 11}, {5});
        b.masked_targets = Tensor::from_ints({3, 17, 22, 5, 30}, {5});
        b.masked_tokens = 5;
        b.tokens = 13;
        out.loss += mlm->forward_loss(b, ctx).loss;
        mlm->backward(4.0f);
        break;
      }
      case Family::Classification: {
        models::ClassificationBatch b;
        b.input_ids = x;
        b.lengths = lengths;
        b.labels = Tensor::from_ints({2, m}, {2});
        b.tokens = 13;
        out.loss += cls->forward_loss(b, ctx).loss;
        cls->backward(4.0f);
        break;
      }
      case Family::EhrMlm: {
        const EhrChannels e = ehr_channels(8, m);
        models::MlmBatch b;
        b.input_ids = x;
        b.token_type_ids = e.types;
        b.age_ids = e.ages;
        b.position_ids = e.positions;
        b.lengths = lengths;
        b.masked_positions = Tensor::from_ints({1, 4, 6, 9, 11}, {5});
        b.masked_targets = Tensor::from_ints({3, 17, 22, 5, 30}, {5});
        b.masked_tokens = 5;
        b.tokens = 13;
        out.loss += mlm->forward_loss(b, ctx).loss;
        mlm->backward(4.0f);
        break;
      }
      case Family::EhrMultilabel: {
        const EhrChannels e = ehr_channels(8, m);
        models::ClassificationBatch b;
        b.input_ids = x;
        b.token_type_ids = e.types;
        b.age_ids = e.ages;
        b.position_ids = e.positions;
        b.lengths = lengths;
        b.targets = Tensor::from_floats({1, 0, 1, 0, static_cast<float>(m), 1}, {2, 3});
        b.tokens = 13;
        out.loss += cls->forward_loss(b, ctx).loss;
        cls->backward(4.0f);
        break;
      }
      case Family::Lm: {
        models::LmBatch b;
        b.input_ids = x;
        b.targets = ids(8, 5, m + 1);
        b.tokens = 13;
        out.loss += lm->forward_loss(b, ctx).loss;
        lm->backward(4.0f);
        break;
      }
    }
  }
  out.grads = store.grads().to_floats();
  return out;
}

class CheckpointGrads : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointGrads, AreBitwiseThoseWithout) {
  const Case k = GetParam();
  const Outcome plain = train(k, false, 3);
  const Outcome ckpt = train(k, true, 3);
  // Something was computed, and dropout is on: another micro-batch index
  // (other masks) gives other gradients, so equal masks are what is compared.
  bool nonzero = false;
  for (float g : plain.grads) nonzero = nonzero || g != 0.0f;
  ASSERT_TRUE(nonzero);
  EXPECT_FALSE(bitwise_equal(plain.grads, train(k, false, 4).grads)) << "dropout is not on";
  EXPECT_EQ(std::memcmp(&plain.loss, &ckpt.loss, sizeof(double)), 0)
      << plain.loss << " vs " << ckpt.loss;
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < plain.grads.size(); ++i)
    if (std::memcmp(&plain.grads[i], &ckpt.grads[i], sizeof(float)) != 0 && differ++ == 0)
      first = i;
  EXPECT_EQ(differ, 0u) << "first at " << first << ": " << plain.grads[first] << " vs "
                        << ckpt.grads[first];
  // The layers report their gradients as final at the same points.
  EXPECT_FALSE(plain.ready.empty());
  EXPECT_EQ(plain.ready, ckpt.ready);
}

const nn::PositionKind kRope = nn::PositionKind::Rope, kLearned = nn::PositionKind::Learned;

INSTANTIATE_TEST_SUITE_P(
    Models, CheckpointGrads,
    ::testing::Values(
        Case{Family::Translation, kRope, false, DType::F32, "translation_rope"},
        Case{Family::Translation, kLearned, false, DType::F32, "translation_learned"},
        Case{Family::Translation, kRope, true, DType::F32, "translation_rope_linear"},
        Case{Family::Translation, kRope, false, DType::BF16, "translation_rope_bf16"},
        Case{Family::Mlm, kRope, false, DType::F32, "mlm_rope"},
        Case{Family::Mlm, kLearned, false, DType::F32, "mlm_learned"},
        Case{Family::Mlm, kRope, true, DType::F32, "mlm_rope_linear"},
        Case{Family::Mlm, kLearned, false, DType::BF16, "mlm_learned_bf16"},
        Case{Family::Mlm, *nn::position_kind("deberta"), false, DType::BF16, "mlm_deberta_bf16"},
        Case{Family::Mlm, *nn::position_kind("tupe"), false, DType::F16, "mlm_tupe_f16"},
        Case{Family::Classification, kRope, false, DType::F32, "classification_rope"},
        Case{Family::Classification, kLearned, false, DType::F32, "classification_learned"},
        Case{Family::Classification, kRope, true, DType::F32, "classification_rope_linear"},
        Case{Family::Lm, kRope, false, DType::F32, "lm_rope"},
        Case{Family::Lm, kLearned, false, DType::F32, "lm_learned"},
        Case{Family::Lm, kRope, true, DType::F32, "lm_rope_linear"},
        Case{Family::Lm, kLearned, true, DType::F32, "lm_learned_linear"},
        Case{Family::Lm, kRope, false, DType::BF16, "lm_rope_bf16"},
        Case{Family::Lm, *nn::position_kind("transformer_xl"), false, DType::BF16, "lm_xl_bf16"},
        Case{Family::Lm, kRope, false, DType::BF16, "lm_rope_rms_bf16", true},
        Case{Family::Mlm, kRope, false, DType::F32, "mlm_rope_rms", true},
        Case{Family::EhrMlm, kLearned, false, DType::F32, "ehr_mlm_visit_learned"},
        Case{Family::EhrMlm, kRope, false, DType::F32, "ehr_mlm_visit_rope"},
        Case{Family::EhrMultilabel, kLearned, false, DType::F32, "ehr_multilabel_visit_learned"},
        Case{Family::EhrMultilabel, kRope, false, DType::F32, "ehr_multilabel_visit_rope"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The most one forward and backward of the causal LM held above what was
// held before it: a batch of 2 x 64 tokens, `layers` layers of width 32.
size_t activation_peak(int layers, bool checkpoint) {
  Config c = tiny_config({Family::Lm, kRope, false, DType::F32, "lm"}, checkpoint, layers);
  c.model.d_model = 32;
  c.model.d_ff = 64;
  c.model.max_positions = 64;
  nn::ParameterStore store;
  models::DecoderLM lm(models::lm_options(c, kVocab), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  store.zero_grad();
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 1;
  models::LmBatch b;
  b.input_ids = ids(64, 64, 0);
  b.targets = ids(64, 64, 1);
  b.tokens = 128;
  const size_t before = bytes_in_use(Device::cpu());
  reset_peak_bytes(Device::cpu());
  lm.forward_loss(b, ctx);
  lm.backward(1.0f);
  const size_t peak = peak_bytes(Device::cpu());
  EXPECT_EQ(bytes_in_use(Device::cpu()), before) << "the backward left tensors behind";
  return peak - before;
}

TEST(CheckpointMemory, ActivationPeakGrowsLessWithLayers) {
  const size_t plain2 = activation_peak(2, false), plain6 = activation_peak(6, false);
  const size_t ckpt2 = activation_peak(2, true), ckpt6 = activation_peak(6, true);
  // Without checkpointing every layer keeps all its activations; with it,
  // only its input [B, T, d] (one layer's activations live at a time).
  EXPECT_LT(ckpt6, plain6);
  EXPECT_LT(ckpt2, plain2);
  ASSERT_GT(plain6, plain2);
  ASSERT_GT(ckpt6, ckpt2);
  const size_t plain_per_layer = (plain6 - plain2) / 4, ckpt_per_layer = (ckpt6 - ckpt2) / 4;
  EXPECT_GT(plain_per_layer, 4 * ckpt_per_layer)
      << "per layer: " << plain_per_layer << " bytes without, " << ckpt_per_layer << " with";
  // What a checkpointed layer keeps is about its input: 2 x 64 x 32 floats.
  EXPECT_LE(ckpt_per_layer, 2 * 2 * 64 * 32 * sizeof(float));
}

// ---- through the binary -----------------------------------------------------

class CheckpointTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = run_rotor(dir_, test::synth_args(dir_ / "data", {300, 10, 10, 5}));
    ASSERT_EQ(r.code, 0) << r.err;
    test::write_mlm_text(dir_ / "data", dir_ / "lm.txt", dir_ / "lm_valid.txt", 10);
    test::tiny_lm(dir_ / "lm.txt", dir_ / "lm_valid.txt", "unused")
        .set("model.decoder_layers", "2")
        .set("train.update_freq", "2")
        .write(dir_ / "lm.yaml");
  }
  RunResult train(const std::string& run, const std::string& extra = "") {
    return run_rotor(
        dir_, "train " + (dir_ / "lm.yaml") + " --set output_dir=" + (dir_ / run) + " " + extra,
        "OMP_NUM_THREADS=1");
  }
  TempDir dir_;
};

// metrics.jsonl without its timings.
std::string figures(const std::string& path) {
  std::string out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    json_io::Json j = json_io::Json::parse(line);
    j.erase("tokens_per_s");
    out += j.dump() + "\n";
  }
  return out;
}

void expect_same_weights(const std::string& a, const std::string& b) {
  checkpoint::SafetensorsFile fa(a), fb(b);
  ASSERT_EQ(fa.names(), fb.names());
  for (const auto& name : fa.names()) {
    Tensor ta = fa.load(name), tb = fb.load(name);
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << name;
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << name << " differs";
  }
}

TEST_F(CheckpointTrain, SameRunAndResumesAcrossTheSetting) {
  RunResult r = train("plain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ((r.out + r.err).find("activation checkpointing"), std::string::npos);
  r = train("ckpt", "--set train.checkpoint_activations=true");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(dir_ / "ckpt/train.log").find("activation checkpointing"), std::string::npos);
  const std::string plain = figures(dir_ / "plain/metrics.jsonl");
  EXPECT_NE(plain.find("\"valid\""), std::string::npos) << plain;
  EXPECT_EQ(figures(dir_ / "ckpt/metrics.jsonl"), plain);
  expect_same_weights(dir_ / "plain/checkpoints/step_4/model.safetensors",
                      dir_ / "ckpt/checkpoints/step_4/model.safetensors");
  EXPECT_EQ(slurp(dir_ / "plain/checkpoints/step_4/optimizer.safetensors"),
            slurp(dir_ / "ckpt/checkpoints/step_4/optimizer.safetensors"));
  // Two updates without, then resumed with it: the uninterrupted run's end.
  r = train("split", "--set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("split", "--resume --set train.checkpoint_activations=true");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_weights(dir_ / "plain/checkpoints/step_4/model.safetensors",
                      dir_ / "split/checkpoints/step_4/model.safetensors");
  EXPECT_EQ(slurp(dir_ / "plain/checkpoints/step_4/optimizer.safetensors"),
            slurp(dir_ / "split/checkpoints/step_4/optimizer.safetensors"));
}

TEST_F(CheckpointTrain, BenchComparesWithAndWithout) {
  RunResult r =
      run_rotor(dir_,
                "bench train " + (dir_ / "lm.yaml") + " --set output_dir=" + (dir_ / "bench") +
                    " --set data.seq_len=48 --set model.decoder_layers=4 --steps 2 "
                    "--warmup 1 --compare-checkpointing --json " +
                    (dir_ / "b.json"),
                "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("train.checkpoint_activations off)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train.checkpoint_activations on)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("activation peak"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("update time"), std::string::npos) << r.out;
  const json_io::Json j = json_io::load(dir_ / "b.json");
  EXPECT_EQ(j.at("compare").get<std::string>(), "train.checkpoint_activations");
  const auto& off = j.at("off");
  const auto& on = j.at("on");
  EXPECT_FALSE(off.at("train").at("checkpoint_activations").get<bool>());
  EXPECT_TRUE(on.at("train").at("checkpoint_activations").get<bool>());
  // The same updates: the same losses, less activation memory.
  EXPECT_EQ(off.at("losses"), on.at("losses"));
  EXPECT_EQ(off.at("batches"), on.at("batches"));
  const int64_t act_off = off.at("activation_peak_bytes").get<int64_t>(),
                act_on = on.at("activation_peak_bytes").get<int64_t>();
  EXPECT_GT(act_on, 0);
  EXPECT_LT(act_on, act_off);
  EXPECT_LE(off.at("activation_peak_bytes").get<int64_t>(), off.at("peak_bytes").get<int64_t>());
}

}  // namespace
}  // namespace rotor
