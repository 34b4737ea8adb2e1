// The YAML config (src/train/config.h): defaults, round trip, and errors that
// name the key path and the line.
#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "config/tasks.h"
#include "core/error.h"
#include "core/io.h"
#include "support/test_util.h"

namespace rotor {
namespace {

std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_from_string(yaml, "configs/x.yaml", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(Config, Defaults) {
  Config c = load_config_from_string("");
  EXPECT_EQ(c, Config{});
  EXPECT_EQ(c.task, *task_kind("translation"));
  EXPECT_EQ(c.output_dir, "runs/default");
  EXPECT_EQ(c.seed, 1);
  EXPECT_EQ(c.device, "auto");
  EXPECT_EQ(c.model.d_model, 512);
  EXPECT_EQ(c.model.position, nn::PositionKind::Sinusoidal);
  EXPECT_DOUBLE_EQ(c.model.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.data.vocab_size, 8000);
  EXPECT_EQ(c.train.max_updates, 100000);
  EXPECT_EQ(c.optim.betas[1], 0.98);
  EXPECT_EQ(c.optim.schedule, optim::ScheduleKind::InverseSqrt);
  EXPECT_EQ(c.decode.max_len_b, 50);
  EXPECT_FALSE(c.dist.shard_optimizer);
  EXPECT_EQ(load_config_from_string("# only a comment\n"), Config{});
  EXPECT_EQ(load_config_from_string("model:\n"), Config{});  // an empty section
}

TEST(Config, ReadsEveryKindOfValue) {
  Config c = load_config_from_string(R"(
task: translation
output_dir: runs/roformer
seed: 7
device: cuda:1
precision: bf16
log_level: debug
model:
  encoder_layers: 12
  d_model: 768
  n_heads: 12
  d_ff: 3072
  activation: gelu
  norm: pre
  position: rope
  rope_base: 1e4
  share_embeddings: no
attention: {impl: reference}
data:
  train: data/wiki.txt
  valid:
  max_tokens: 1e5
optim:
  name: adamw
  betas: [0.9, 0.999]
  lr: 1.0e-4
  schedule: linear
train:
  max_updates: 200000
)");
  EXPECT_EQ(c.task, *task_kind("translation"));
  EXPECT_EQ(c.device, "cuda:1");
  EXPECT_EQ(c.precision, Precision::BF16);
  EXPECT_EQ(c.log_level, LogLevel::Debug);
  EXPECT_EQ(c.model.activation, ops::Activation::GELU);
  EXPECT_EQ(c.model.norm, NormPlacement::Pre);
  EXPECT_EQ(c.model.position, nn::PositionKind::Rope);
  EXPECT_EQ(c.model.rope.theta, 10000.0);  // the deprecated spelling model.rope_base
  EXPECT_FALSE(c.model.share_embeddings);
  EXPECT_EQ(c.attention.impl, nn::AttentionImpl::Reference);
  EXPECT_EQ(c.data.train, "data/wiki.txt");
  EXPECT_EQ(c.data.valid, "");
  EXPECT_EQ(c.data.max_tokens, 100000);
  EXPECT_EQ(c.optim.name, OptimizerName::AdamW);
  EXPECT_EQ(c.optim.betas, (std::array<double, 2>{0.9, 0.999}));
  EXPECT_EQ(c.optim.lr, 1e-4);
  EXPECT_EQ(c.train.max_updates, 200000);
}

TEST(Config, DumpLoadRoundTrip) {
  Config c;
  c.task = *task_kind("mlm");
  c.output_dir = "runs/with \"quotes\" and: colon # hash";
  c.seed = 123456789012;
  c.device = "cuda:3";
  c.precision = Precision::FP16;
  c.model.position = nn::PositionKind::Learned;
  c.model.dropout = 0.3;
  c.model.layer_norm_eps = 1e-12;
  c.model.rope.theta = 10000.0;
  c.data.src_lang = "yes";  // a string that YAML would read as a boolean unquoted
  c.data.tgt_lang = "123";
  c.data.valid = "";
  c.optim.betas = {0.9, 0.999};
  c.optim.lr = 1.0 / 3.0;
  c.decode.lenpen = -0.25;
  c.decode.max_len_b = 5;
  c.dist.shard_optimizer = true;
  std::string text = dump_config(c);
  Config back = load_config_from_string(text, "dump");
  EXPECT_EQ(back, c) << text;
  EXPECT_EQ(dump_config(back), text);
  // Every key is there, defaults included.
  EXPECT_NE(text.find("\n  activation_dropout: 0.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  layer_norm_eps: 1.0e-12\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  betas: [0.9, 0.999]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndist:\n  bucket_mb: 25.0\n"), std::string::npos) << text;
  EXPECT_EQ(load_config_from_string(dump_config(Config{})), Config{});

  // And through a file.
  test::TempDir tmp;
  atomic_write_file(tmp / "c.yaml", text);
  EXPECT_EQ(load_config(tmp / "c.yaml"), c);
}

TEST(Config, EnumNamesRoundTrip) {
  EXPECT_EQ(to_string(nn::PositionKind::Rope), "rope");
  EXPECT_EQ(enum_from_string<optim::ScheduleKind>("inverse_sqrt"),
            optim::ScheduleKind::InverseSqrt);
  EXPECT_FALSE(enum_from_string<ops::Activation>("swish").has_value());
  // "none" is an activation of the GEMM epilogue, not of a feed-forward layer.
  EXPECT_FALSE(enum_from_string<ops::Activation>("none").has_value());
  EXPECT_EQ(enum_choices<NormPlacement>(), "post | pre");
}

TEST(Config, UnknownKeyNamesPathAndLine) {
  std::string e = load_error("task: translation\nmodle:\n  d_model: 3\n");
  EXPECT_EQ(e, "configs/x.yaml:2: unknown key modle (did you mean model?)");
  e = load_error("model:\n  d_model: 256\n  n_haeds: 4\n");
  EXPECT_EQ(e, "configs/x.yaml:3: unknown key model.n_haeds (did you mean model.n_heads?)");
  e = load_error("optim:\n  lr: 1e-3\n  frobnicate: 1\n");
  EXPECT_EQ(e, "configs/x.yaml:3: unknown key optim.frobnicate");
  e = load_error("attention:\n  impl: auto\n  flash: true\n");
  EXPECT_NE(e.find("configs/x.yaml:3: unknown key attention.flash"), std::string::npos) << e;
}

TEST(Config, WrongTypeNamesPathAndLine) {
  EXPECT_EQ(load_error("train:\n  log_interval: 10\n  max_updates: abc\n"),
            "configs/x.yaml:3: train.max_updates: expected a positive integer, got \"abc\"");
  EXPECT_EQ(load_error("\n\nmodel:\n  share_embeddings: maybe\n"),
            "configs/x.yaml:4: model.share_embeddings: expected true or false, got \"maybe\"");
  EXPECT_EQ(load_error("optim:\n  lr: [1, 2]\n"),
            "configs/x.yaml:2: optim.lr: expected a number > 0, got a list");
  EXPECT_EQ(load_error("model: 5\n"),
            "configs/x.yaml:1: model: expected a mapping of keys, got \"5\"");
  EXPECT_EQ(load_error("output_dir: {a: 1}\n"),
            "configs/x.yaml:1: output_dir: expected a string, got a mapping");
  EXPECT_EQ(load_error("seed:\n"),
            "configs/x.yaml:1: seed: expected an integer >= 0, got nothing (null)");
  EXPECT_EQ(load_error("optim:\n  betas: 0.9\n"),
            "configs/x.yaml:2: optim.betas: expected a list of two numbers, each a number in [0, "
            "1), got \"0.9\"");
  EXPECT_EQ(load_error("- a\n- b\n"),
            "configs/x.yaml:1: expected a mapping of config keys at the top level, got a list");
  EXPECT_EQ(load_error("model:\n  d_model: 1.5\n"),
            "configs/x.yaml:2: model.d_model: expected a positive integer, got \"1.5\"");
}

TEST(Config, OutOfRangeNamesPathAndLine) {
  EXPECT_EQ(load_error("train:\n  max_updates: 0\n"),
            "configs/x.yaml:2: train.max_updates: expected a positive integer, got \"0\"");
  EXPECT_EQ(load_error("model:\n  dropout: 1.0\n"),
            "configs/x.yaml:2: model.dropout: expected a number in [0, 1), got \"1.0\"");
  EXPECT_EQ(load_error("seed: -1\n"),
            "configs/x.yaml:1: seed: expected an integer >= 0, got \"-1\"");
  EXPECT_EQ(load_error("data:\n  character_coverage: 0\n"),
            "configs/x.yaml:2: data.character_coverage: expected a number in (0, 1], got \"0\"");
  EXPECT_EQ(load_error("optim:\n  betas: [0.9, 1.5]\n"),
            "configs/x.yaml:2: optim.betas[1]: expected a number in [0, 1), got \"1.5\"");
  EXPECT_EQ(load_error("optim:\n  betas:\n    - 0.9\n    - 0.98\n    - 0.5\n"),
            "configs/x.yaml:3: optim.betas: expected a list of two numbers, each a number in [0, "
            "1), got a list of 3");
  EXPECT_EQ(load_error("model:\n  d_model: 99999999999\n"),
            "configs/x.yaml:2: model.d_model: expected a positive integer, got \"99999999999\"");
  EXPECT_EQ(load_error("optim:\n  lr: nan\n"),
            "configs/x.yaml:2: optim.lr: expected a number > 0, got \"nan\"");
}

TEST(Config, BadEnumNamesChoices) {
  EXPECT_EQ(load_error("model:\n  position: rotary\n"),
            "configs/x.yaml:2: model.position: expected one of sinusoidal | learned | rope | none "
            "| alibi | t5 | transformer_xl | tupe | deberta, "
            "got \"rotary\"");
  EXPECT_EQ(load_error("task: gpt\n"),
            "configs/x.yaml:1: task: expected one of translation | mlm | classification | lm | "
            "multilabel, "
            "got \"gpt\"");
  EXPECT_EQ(load_error("device: gpu\n"),
            "configs/x.yaml:1: device: expected auto, cpu, cuda or cuda:N, got \"gpu\"");
  EXPECT_EQ(load_error("device: cuda:x\n"),
            "configs/x.yaml:1: device: expected auto, cpu, cuda or cuda:N, got \"cuda:x\"");
}

TEST(Config, DuplicateKeysAndBadYaml) {
  EXPECT_EQ(load_error("seed: 1\nseed: 2\n"), "configs/x.yaml:2: seed: duplicate key");
  std::string e = load_error("model:\n  d_model: [1, 2\n");
  EXPECT_NE(e.find("configs/x.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
}

TEST(Config, CrossFieldChecks) {
  EXPECT_EQ(load_error("model:\n  d_model: 512\n  n_heads: 7\n"),
            "configs/x.yaml:3: model.n_heads: 7 heads do not divide model.d_model = 512");
  std::string e = load_error("model:\n  d_model: 24\n  n_heads: 8\n  position: rope\n");
  EXPECT_NE(e.find("configs/x.yaml:4: model.position: rope rotates pairs"), std::string::npos) << e;
  e = load_error("task: mlm\ndata:\n  mask_token_prob: 0.8\n  random_token_prob: 0.3\n");
  EXPECT_NE(e.find("configs/x.yaml:4: data.random_token_prob:"), std::string::npos) << e;
  // A rule names the line of the key it is about, not the first key involved.
  EXPECT_EQ(
      load_error("model:\n  norm: pre\ntask: mlm\n"),
      "configs/x.yaml:2: model.norm: task mlm builds BERT/RoFormer, which are post-LN; got pre");
  EXPECT_EQ(load_error("task: mlm\n", {"model.norm=pre"}),
            "--set model.norm=pre: model.norm: task mlm builds BERT/RoFormer, which are post-LN; "
            "got pre");
  // ALiBi runs in rotor's CUDA cores too; cuDNN's attention has no such bias.
  EXPECT_EQ(load_config_from_string("device: cuda:0\nmodel:\n  position: alibi\n").device,
            "cuda:0");
  EXPECT_EQ(load_error("model:\n  position: alibi\nattention:\n  impl: cudnn\n"),
            "configs/x.yaml:4: attention.impl: cudnn is cuDNN's attention, which does not add "
            "ALiBi's bias (model.position alibi); use auto, rotor or reference");
  // T5's bias: the materialized cores, the CPU flash twin and rotor's CUDA
  // flash kernels (a table up to max_distance 512) add it; cuDNN does not,
  // nor does linear attention, and visit positions are not what it counts.
  EXPECT_EQ(load_error("model:\n  position: t5\nattention:\n  impl: cudnn\n"),
            "configs/x.yaml:4: attention.impl: cudnn is cuDNN's attention, which does not add "
            "T5's relative bias (model.position t5); use auto or reference");
  EXPECT_EQ(load_error("device: cuda\nmodel:\n  position: t5\n  t5:\n    max_distance: "
                       "1024\nattention:\n  impl: rotor\n"),
            "configs/x.yaml:7: attention.impl: rotor's CUDA flash kernels hold T5's table for "
            "model.t5.max_distance up to 512, not 1024; use auto or reference on a GPU");
  EXPECT_EQ(load_config_from_string("device: cuda\nmodel:\n  position: t5\n  t5:\n    "
                                    "max_distance: 512\nattention:\n  impl: rotor\n")
                .attention.impl,
            nn::AttentionImpl::Rotor);
  EXPECT_EQ(load_config_from_string("device: cpu\nmodel:\n  position: t5\nattention:\n  impl: "
                                    "rotor\n")
                .attention.impl,
            nn::AttentionImpl::Rotor);
  EXPECT_EQ(load_error("model:\n  position: t5\nattention:\n  kind: linear\n"),
            "configs/x.yaml:4: attention.kind: linear attention has no scores to add T5's "
            "relative bias to (model.position t5); use attention.kind softmax");
  // Transformer-XL's terms: the materialized core on the CPU, in fp32.
  EXPECT_EQ(load_error("model:\n  position: transformer_xl\nattention:\n  impl: rotor\n"),
            "configs/x.yaml:4: attention.impl: rotor does not add Transformer-XL's relative terms "
            "(model.position transformer_xl), a dense bias that only the materialized core adds; "
            "use auto or reference");
  EXPECT_EQ(load_config_from_string("device: cuda\nmodel:\n  position: transformer_xl\n").device,
            "cuda");
  // fp16/bf16 training: the terms compute in f32 (nn/attention.cpp).
  EXPECT_EQ(load_config_from_string("device: cuda\nprecision: bf16\nmodel:\n  position: "
                                    "transformer_xl\n")
                .precision,
            Precision::BF16);
  EXPECT_EQ(
      load_config_from_string("precision: fp16\nmodel:\n  position: transformer_xl\n").precision,
      Precision::FP16);
  EXPECT_EQ(load_error("model:\n  position: transformer_xl\nattention:\n  kind: linear\n"),
            "configs/x.yaml:4: attention.kind: linear attention has no scores to add "
            "Transformer-XL's relative terms to (model.position transformer_xl); use "
            "attention.kind softmax");
  // TUPE's correlation, XL's and DeBERTa's terms run on CUDA too (the
  // materialized core adds them).
  EXPECT_EQ(load_config_from_string("task: mlm\ndevice: cuda\nmodel:\n  encoder_layers: 1\n  "
                                    "position: tupe\n")
                .device,
            "cuda");
  EXPECT_EQ(load_config_from_string("task: mlm\ndevice: cuda\nmodel:\n  encoder_layers: 1\n  "
                                    "position: deberta\n")
                .device,
            "cuda");
  // TUPE: the BERT encoder's tasks, model.tupe.relative only under tupe,
  // where model.t5's keys set its T5 bias.
  EXPECT_EQ(load_error("task: lm\nmodel:\n  decoder_layers: 1\n  position: tupe\n"),
            "configs/x.yaml:4: model.position: tupe is built for the BERT encoder, whose first "
            "token is [CLS] (tasks mlm, classification, multilabel); task lm builds a "
            "decoder-only LM");
  EXPECT_EQ(load_error("task: mlm\nmodel:\n  encoder_layers: 1\n  tupe:\n    relative: true\n"),
            "configs/x.yaml:5: model.tupe.relative: a setting of model.position tupe, and "
            "model.position is sinusoidal");
  EXPECT_EQ(load_error("task: mlm\nmodel:\n  encoder_layers: 1\n  position: tupe\n  t5:\n    "
                       "buckets: 16\n"),
            "configs/x.yaml:6: model.t5.buckets: a setting of model.position t5 (or tupe with "
            "model.tupe.relative), and model.position is tupe");
  EXPECT_EQ(load_config_from_string("task: mlm\nmodel:\n  encoder_layers: 1\n  position: tupe\n  "
                                    "tupe:\n    relative: true\n  t5:\n    buckets: 16\n")
                .model.t5.buckets,
            16);
  // DeBERTa: the BERT encoder's tasks; model.deberta's keys only under it,
  // with even buckets whose reach lies beyond their exact half.
  EXPECT_EQ(load_error("task: lm\nmodel:\n  decoder_layers: 1\n  position: deberta\n"),
            "configs/x.yaml:4: model.position: deberta is built for the BERT encoder so far "
            "(tasks mlm, classification, multilabel); task lm builds a decoder-only LM");
  EXPECT_EQ(load_error("task: mlm\nmodel:\n  encoder_layers: 1\n  deberta:\n    "
                       "position_buckets: 64\n"),
            "configs/x.yaml:5: model.deberta.position_buckets: a setting of model.position "
            "deberta, and model.position is sinusoidal");
  EXPECT_EQ(load_error("task: mlm\nmodel:\n  encoder_layers: 1\n  position: deberta\n  "
                       "deberta:\n    position_buckets: 7\n"),
            "configs/x.yaml:6: model.deberta.position_buckets: 7: 0 (no buckets) or an even count "
            "of at least 4");
  EXPECT_EQ(load_error("task: mlm\nmodel:\n  encoder_layers: 1\n  position: deberta\n  "
                       "deberta:\n    max_relative_positions: 100\n"),
            "configs/x.yaml:6: model.deberta.max_relative_positions: 100 does not reach beyond "
            "the 128 exact distances of model.deberta.position_buckets = 256");
  EXPECT_EQ(load_config_from_string("device: cuda\nprecision: fp16\ntask: mlm\nmodel:\n  "
                                    "encoder_layers: 1\n  position: deberta\n")
                .precision,
            Precision::FP16);
  EXPECT_EQ(load_config_from_string("precision: bf16\ntask: mlm\nmodel:\n  encoder_layers: 1\n"
                                    "  position: tupe\n")
                .precision,
            Precision::BF16);
  // model.t5's keys: only under t5, and a log-spaced range that is not empty.
  EXPECT_EQ(load_error("model:\n  t5:\n    buckets: 64\n"),
            "configs/x.yaml:3: model.t5.buckets: a setting of model.position t5 (or tupe with "
            "model.tupe.relative), and model.position is sinusoidal");
  EXPECT_EQ(load_error("model:\n  position: t5\n  t5:\n    buckets: 33\n"),
            "configs/x.yaml:4: model.t5.buckets: 33 is odd; an encoder gives half the buckets to "
            "each side");
  EXPECT_EQ(load_error("model:\n  position: t5\n  t5:\n    buckets: 32\n    max_distance: 16\n"),
            "configs/x.yaml:5: model.t5.max_distance: 16 does not exceed the 16 distances with a "
            "bucket each (half of model.t5.buckets = 32); the log-spaced buckets need room beyond "
            "them");
  EXPECT_EQ(load_error("model:\n  position: t5\n  t5:\n    buckets: 2\n"),
            "configs/x.yaml:4: model.t5.buckets: expected an integer from 4 to 1024, got \"2\"");
  {
    const Config t5 = load_config_from_string(
        "model:\n  position: t5\n  t5:\n    buckets: 64\n    max_distance: 256\n");
    EXPECT_EQ(t5.model.t5.buckets, 64);
    EXPECT_EQ(t5.model.t5.max_distance, 256);
  }
  // fp16 on the CPU is emulated, not an error; an unknown precision is.
  EXPECT_EQ(load_config_from_string("device: cpu\nprecision: fp16\n").precision, Precision::FP16);
  e = load_error("precision: fp8\n");
  EXPECT_NE(e.find("configs/x.yaml:1: precision"), std::string::npos) << e;
  // All defaults but one: the origin without a line.
  e = load_error("", {"model.n_heads=5"});
  EXPECT_EQ(e, "--set model.n_heads=5: model.n_heads: 5 heads do not divide model.d_model = 512");

  // A config built in code has no origins: "KEY: what".
  Config c;
  validate(c);
  c.model.n_heads = 3;
  try {
    validate(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()), "model.n_heads: 3 heads do not divide model.d_model = 512");
  }
  c = Config{};
  EXPECT_THROW(validate_for_training(c), Error);
  c.data.train = "data/train";
  validate_for_training(c);
  // A loaded config keeps its origins for validate() after changes in code.
  c = load_config_from_string("task: mlm\nmodel:\n  d_model: 64\n", "configs/x.yaml");
  c.model.norm = NormPlacement::Pre;
  try {
    validate_for_training(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    // model.norm is not in the file: the line of the other key involved.
    EXPECT_EQ(std::string(err.what()).rfind("configs/x.yaml:1: model.norm: task mlm builds", 0), 0u)
        << err.what();
  }
  c.model.norm = NormPlacement::Post;
  try {
    validate_for_training(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()).rfind("configs/x.yaml: data.train: required for training", 0),
              0u)
        << err.what();
  }
}

// src/tasks/tasks.def: one row per task, found by its name, each reporting
// its loss; the default task is the first registered, translation.
TEST(Config, EveryTaskHasOneRow) {
  EXPECT_GE(task_kinds().size(), 5u);
  EXPECT_EQ(Config{}.task.name(), "translation");
  for (const auto& [task, name] : EnumNames<Task>::items) {
    SCOPED_TRACE(std::string(name));
    const TaskSpec& spec = task_spec(task);
    EXPECT_EQ(spec.name, name);
    ASSERT_TRUE(task_kind(name));
    EXPECT_EQ(*task_kind(name), task);
    ASSERT_FALSE(spec.metrics.empty());
    EXPECT_EQ(spec.metrics.front().metric, ValidMetric::Loss);
    Config c;
    c.task = task;
    EXPECT_EQ(metric_unavailable(c, ValidMetric::Loss), "");
    EXPECT_FALSE(spec.required_data.empty());
  }
}

// Every config shipped under configs/ loads and is fit to train.
TEST(Config, ShippedConfigsValidate) {
  int n = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(ROTOR_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    Config c;
    EXPECT_NO_THROW(c = load_config(e.path().string()));
    EXPECT_NO_THROW(validate_for_training(c));
    ++n;
  }
  EXPECT_GT(n, 10);
}

TEST(Config, SetOverridesNestedKeysAndLists) {
  Config c = load_config_from_string(
      "model:\n  d_model: 256\n  n_heads: 4\noptim:\n  betas: [0.9, 0.98]\n", "x",
      {"model.d_model=128", "train.max_updates=50", "optim.betas=[0.8, 0.9]", "model.position=rope",
       "seed=9", "data.valid=", "output_dir=out dir"});
  EXPECT_EQ(c.model.d_model, 128);
  EXPECT_EQ(c.model.n_heads, 4);  // untouched sibling
  EXPECT_EQ(c.train.max_updates, 50);
  EXPECT_EQ(c.optim.betas, (std::array<double, 2>{0.8, 0.9}));
  EXPECT_EQ(c.model.position, nn::PositionKind::Rope);
  EXPECT_EQ(c.seed, 9);
  EXPECT_EQ(c.data.valid, "");
  EXPECT_EQ(c.output_dir, "out dir");
  // One element of a list, either spelling; the last override wins.
  c = load_config_from_string("optim:\n  betas: [0.9, 0.98]\n", "x", {"optim.betas.1=0.999"});
  EXPECT_EQ(c.optim.betas, (std::array<double, 2>{0.9, 0.999}));
  c = load_config_from_string("", "x", {"optim.betas[0]=0.5", "seed=3", "seed=4"});
  EXPECT_EQ(c.optim.betas, (std::array<double, 2>{0.5, 0.98}));
  EXPECT_EQ(c.seed, 4);
  // A section that is null in the file.
  c = load_config_from_string("model:\n", "x", {"model.d_ff=64"});
  EXPECT_EQ(c.model.d_ff, 64);
}

TEST(Config, SetErrorsNameTheOverride) {
  EXPECT_EQ(load_error("model:\n  d_model: 256\n", {"model.d_modle=128"}),
            "--set model.d_modle=128: unknown key model.d_modle (did you mean model.d_model?)");
  EXPECT_EQ(load_error("", {"nosuch.key=1"}), "--set nosuch.key=1: unknown key nosuch");
  EXPECT_EQ(
      load_error("train:\n  max_updates: 10\n", {"train.max_updates=abc"}),
      "--set train.max_updates=abc: train.max_updates: expected a positive integer, got \"abc\"");
  EXPECT_EQ(load_error("", {"optim.betas=[0.9]"}),
            "--set optim.betas=[0.9]: optim.betas: expected a list of two numbers, each a number "
            "in [0, 1), got a "
            "list of 1");
  EXPECT_EQ(load_error("", {"model.position=rotary"}),
            "--set model.position=rotary: model.position: expected one of sinusoidal | learned | "
            "rope | none | alibi | t5 | transformer_xl | tupe | deberta, got "
            "\"rotary\"");
  EXPECT_EQ(load_error("", {"seed"}),
            "--set seed: expected KEY=VALUE, e.g. --set train.max_updates=1000");
  EXPECT_EQ(load_error("", {"=3"}),
            "--set =3: expected KEY=VALUE, e.g. --set train.max_updates=1000");
  EXPECT_EQ(load_error("", {"model..d_model=3"}),
            "--set model..d_model=3: malformed key \"model..d_model\"");
  EXPECT_EQ(load_error("", {"seed.x=3"}),
            "--set seed.x=3: seed is not a section, it has no key \"x\"");
  EXPECT_EQ(load_error("", {"optim.betas.2=0.5"}),
            "--set optim.betas.2=0.5: optim.betas is a list of 2; \"2\" is not an index into it");
  std::string e = load_error("", {"seed=[1,"});
  EXPECT_NE(e.find("--set seed=[1,: the value is not valid YAML"), std::string::npos) << e;
  // An error in the file is still reported at its line when other keys are overridden.
  EXPECT_EQ(load_error("seed: 1\nmodel:\n  bogus: 1\n", {"seed=2"}),
            "configs/x.yaml:3: unknown key model.bogus");
}

TEST(Config, LoadConfigFileErrors) {
  test::TempDir tmp;
  try {
    load_config(tmp / "missing.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.yaml"), std::string::npos) << e.what();
  }
  std::string path = tmp / "bad.yaml";
  atomic_write_file(path, "train:\n  max_updates: abc\n");
  try {
    load_config(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ":2: train.max_updates: expected a positive integer, got \"abc\"");
  }
}

}  // namespace
}  // namespace rotor

namespace rotor {
namespace {

// A task's own defaults (config/tasks.h, TaskSpec::defaults) apply to the
// keys a config did not write, and never override one it did, whether in the
// file or by --set.
TEST(TaskDefaults, LmIsPreLnUnlessTheConfigSaysOtherwise) {
  EXPECT_EQ(load_config_from_string("task: lm\n").model.norm, NormPlacement::Pre);
  EXPECT_EQ(load_config_from_string("task: lm\nmodel:\n  norm: post\n").model.norm,
            NormPlacement::Post);
  EXPECT_EQ(load_config_from_string("task: lm\n", "x", {"model.norm=post"}).model.norm,
            NormPlacement::Post);
  // Other tasks keep Config{}'s post-LN.
  EXPECT_EQ(load_config_from_string("task: translation\n").model.norm, NormPlacement::Post);
  // A dumped config writes every key: it reads back equal.
  const Config c = load_config_from_string("task: lm\n");
  EXPECT_EQ(load_config_from_string(dump_config(c)), c);
}

TEST(TaskDefaults, MultilabelPicksTheBestCheckpointByAp) {
  const std::string base = "task: multilabel\ndata:\n  valid: v.tsv\n";
  EXPECT_EQ(load_config_from_string(base).train.best_metric, ValidMetric::Ap);
  EXPECT_EQ(load_config_from_string(base + "train:\n  best_metric: auroc\n").train.best_metric,
            ValidMetric::Auroc);
  EXPECT_EQ(load_config_from_string(base, "x", {"train.best_metric=loss"}).train.best_metric,
            ValidMetric::Loss);
  // Without a validation set there is no AP to pick by.
  EXPECT_EQ(load_config_from_string("task: multilabel\n").train.best_metric, ValidMetric::Loss);
  EXPECT_EQ(
      load_config_from_string("task: classification\ndata:\n  valid: v.tsv\n  labels: [a, b]\n")
          .train.best_metric,
      ValidMetric::Loss);
}

}  // namespace
}  // namespace rotor
