// `rotor bench train` through the binary: the report, its JSON figures (the
// micro-batches the peer script replays), phases that add up to the step, no
// files written into the run directory, the same first losses as `rotor
// train` (also from a model.init_from), and clear errors for bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/profile.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;

// The profile's device hook (what --profile sets on a GPU): called as each
// scope opens and closes while profiling is on, never while it is off;
// nested scopes keep their self times.
int g_syncs = 0;
TEST(Profile, SyncHookRunsAtEachScopesStartAndEnd) {
  g_syncs = 0;
  rotor::profile::take();
  rotor::profile::set_sync(+[] { ++g_syncs; });
  { rotor::profile::Scope off("off(x)"); }
  EXPECT_EQ(g_syncs, 0);
  rotor::profile::set_enabled(true);
  {
    rotor::profile::Scope outer("outer(x)");
    rotor::profile::Scope inner("inner(y)");
  }
  rotor::profile::set_enabled(false);
  rotor::profile::set_sync(nullptr);
  EXPECT_EQ(g_syncs, 4);
  const auto rows = rotor::profile::take();
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) EXPECT_EQ(r.calls, 1) << r.op;
}
using rotor::test::TempDir;

using rotor::test::RunResult;
using rotor::test::slurp;

RunResult rotor_run(const TempDir& dir, const std::string& args) {
  return rotor::test::run_rotor(dir, args, "OMP_NUM_THREADS=1");
}

class BenchTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = rotor_run(dir_, rotor::test::synth_args(dir_ / "data", {300, 20, 20, 10, 2}));
    ASSERT_EQ(r.code, 0) << r.err;
    // Two micro-batches an update, no validation and no checkpoint.
    rotor::test::tiny_translation(dir_ / "data", dir_ / "run")
        .set("seed", "3")
        .erase("data.valid")
        .set("data.max_tokens", "256")
        .set("train.max_updates", "100")
        .set("train.update_freq", "2")
        .erase("train.log_interval")
        .erase("train.valid_interval")
        .erase("train.save_interval")
        .set("optim.lr", "1.0e-3")
        .set("optim.warmup_updates", "4")
        .write(dir_ / "tiny.yaml");
  }
  TempDir dir_;
};

TEST_F(BenchTrain, ReportsThroughputPhasesAndBatches) {
  auto r = rotor_run(dir_, "bench train " + (dir_ / "tiny.yaml") + " --steps 4 --warmup 1 --json " +
                               (dir_ / "bench.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("throughput:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forward"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backward"), std::string::npos) << r.out;

  const rotor::json_io::Json v = rotor::json_io::load(dir_ / "bench.json");
  EXPECT_EQ(v.at("task").get<std::string>(), "translation");
  EXPECT_EQ(v.at("steps").get<int64_t>(), 4);
  EXPECT_EQ(v.at("warmup").get<int64_t>(), 1);
  EXPECT_GT(v.at("parameters").get<int64_t>(), 0);
  const int64_t tokens = v.at("tokens").get<int64_t>();
  EXPECT_GT(tokens, 0);
  EXPECT_GT(v.at("all_tokens").get<int64_t>(), tokens);  // source + target
  const double seconds = v.at("seconds").get<double>();
  ASSERT_GT(seconds, 0);
  EXPECT_NEAR(v.at("tokens_per_s").get<double>(), static_cast<double>(tokens) / seconds,
              1e-6 * static_cast<double>(tokens) / seconds);
  // Every micro-batch of the timed updates (4 updates x update_freq 2), with
  // the shapes the model saw; their target tokens add up to the total.
  const auto& batches = v.at("batches");
  ASSERT_TRUE(batches.is_array());
  ASSERT_EQ(batches.size(), 8u);
  int64_t sum = 0;
  for (const auto& b : batches) {
    EXPECT_GT(b.at("sequences").get<int64_t>(), 0);
    EXPECT_GT(b.at("src_len").get<int64_t>(), 0);
    EXPECT_GT(b.at("tgt_len").get<int64_t>(), 0);
    const int64_t max_tokens = 256;
    EXPECT_LE(b.at("sequences").get<int64_t>() * b.at("tgt_len").get<int64_t>(), max_tokens);
    sum += b.at("tokens").get<int64_t>();
  }
  EXPECT_EQ(sum, tokens);
  // The padding: token slots (rows x padded source + target length) that
  // hold no token, as the batches give them.
  int64_t slots = 0, real = 0;
  for (const auto& b : batches) {
    slots += b.at("sequences").get<int64_t>() *
             (b.at("src_len").get<int64_t>() + b.at("tgt_len").get<int64_t>());
    real += b.at("all_tokens").get<int64_t>();
  }
  EXPECT_EQ(v.at("padded_slots").get<int64_t>(), slots);
  EXPECT_NEAR(v.at("padding_fraction").get<double>(),
              1.0 - static_cast<double>(real) / static_cast<double>(slots), 1e-12);
  EXPECT_GT(v.at("padding_fraction").get<double>(), 0.0);  // ragged sentences pad
  EXPECT_NE(r.out.find("padding: "), std::string::npos) << r.out;
  // On the CPU the phases come from the timed pass: they cover the step.
  const double step_ms = v.at("step_ms").get<double>();
  double phases = 0;
  for (const char* p : {"data", "forward", "backward", "optimizer"}) {
    const double ms = v.at("phases").at(p).at("ms").get<double>();
    EXPECT_GE(ms, 0) << p;
    phases += ms;
  }
  EXPECT_GT(v.at("phases").at("forward").at("ms").get<double>(), 0);
  EXPECT_GT(v.at("phases").at("backward").at("ms").get<double>(), 0);
  EXPECT_NEAR(phases, step_ms, 0.2 * step_ms + 1.0);
  EXPECT_LE(v.at("step_ms_min").get<double>(), v.at("step_ms_max").get<double>());
  // A benchmark writes no checkpoint, log or metrics.
  EXPECT_FALSE(fs::exists(dir_ / "run/checkpoints"));
  EXPECT_FALSE(fs::exists(dir_ / "run/metrics.jsonl"));
}

// --profile: a pass of its own with every op timed; the ops of a translator's
// update are there (GEMMs with their FLOPs, both directions of layer norm),
// their self times fit in the profiled update, and the figures of the
// measured pass are reported as without it.
TEST_F(BenchTrain, ProfileTimesEachOp) {
  auto r = rotor_run(dir_, "bench train " + (dir_ / "tiny.yaml") +
                               " --steps 3 --warmup 1 --profile --json " + (dir_ / "p.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("profile: 3 more updates"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos) << r.out;
  const rotor::json_io::Json v = rotor::json_io::load(dir_ / "p.json");
  ASSERT_TRUE(v.contains("profile")) << v.dump();
  const auto& p = v.at("profile");
  EXPECT_EQ(p.at("updates").get<int64_t>(), 3);
  const double step_ms = p.at("step_ms").get<double>();
  ASSERT_GT(step_ms, 0);
  std::map<std::string, rotor::json_io::Json> ops;
  double self_ms = 0;
  for (const auto& op : p.at("ops")) {
    ops[op.at("op").get<std::string>()] = op;
    EXPECT_GT(op.at("calls").get<int64_t>(), 0);
    EXPECT_GE(op.at("seconds").get<double>(), 0);
    self_ms += op.at("seconds").get<double>() * 1e3 / 3.0;
  }
  for (const char* name : {"gemm", "layer_norm_forward", "layer_norm_backward", "adamw_step",
                           "cross_entropy_forward", "embedding_backward"})
    EXPECT_TRUE(ops.count(name)) << name << " missing from " << p.dump();
  ASSERT_TRUE(ops.count("gemm"));
  EXPECT_GT(ops["gemm"].at("flops").get<double>(), 0);
  EXPECT_EQ(ops["adamw_step"].at("calls").get<int64_t>(), 3);  // one step an update
  EXPECT_LE(self_ms, step_ms * 1.05 + 1.0);
  // Without --profile there is no profile, and the step figures are there either way.
  EXPECT_GT(v.at("step_ms").get<double>(), 0);
  r = rotor_run(dir_, "bench train " + (dir_ / "tiny.yaml") + " --steps 1 --warmup 0 --json " +
                          (dir_ / "q.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(rotor::json_io::load(dir_ / "q.json").contains("profile"));
}

// The bench runs the trainer's own update step (train/step.h): with no
// warm-up its updates are the first updates of `rotor train` on the same
// config, so their losses are equal (fp16 exercises the loss scaler and the
// precision hooks the step owns as well).
TEST_F(BenchTrain, SharesTheUpdateStepWithTraining) {
  for (const char* precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    const std::string set = std::string(" --set precision=") + precision;
    auto b = rotor_run(dir_, "bench train " + (dir_ / "tiny.yaml") +
                                 " --steps 5 --warmup 0 --json " + (dir_ / "bench.json") + set);
    ASSERT_EQ(b.code, 0) << b.err;
    const std::string run = dir_ / (std::string("train_") + precision);
    auto t = rotor_run(dir_, "train " + (dir_ / "tiny.yaml") + set + " --set output_dir=" + run +
                                 " --set train.max_updates=5 --set train.log_interval=1");
    ASSERT_EQ(t.code, 0) << t.err;
    const auto losses = rotor::json_io::load(dir_ / "bench.json").at("losses");
    ASSERT_EQ(losses.size(), 5u);
    std::istringstream metrics(slurp(run + "/metrics.jsonl"));
    std::string line;
    size_t i = 0;
    while (std::getline(metrics, line)) {
      const auto rec = rotor::json_io::Json::parse(line);
      if (rec.at("split").get<std::string>() != "train") continue;
      ASSERT_LT(i, losses.size());
      EXPECT_EQ(rec.at("step").get<int64_t>(), static_cast<int64_t>(i + 1));
      // metrics.jsonl holds the loss as printed with 17 significant digits.
      EXPECT_DOUBLE_EQ(rec.at("loss").get<double>(), losses[i].get<double>()) << "update " << i + 1;
      ++i;
    }
    EXPECT_EQ(i, 5u);
  }
}

// The train-split losses of metrics.jsonl, in update order.
std::vector<double> train_losses(const std::string& metrics_path) {
  std::vector<double> out;
  std::istringstream metrics(slurp(metrics_path));
  for (std::string line; std::getline(metrics, line);) {
    const auto rec = rotor::json_io::Json::parse(line);
    if (rec.at("split").get<std::string>() != "train") continue;
    EXPECT_EQ(rec.at("step").get<int64_t>(), static_cast<int64_t>(out.size() + 1));
    out.push_back(rec.at("loss").get<double>());
  }
  return out;
}

// Bench and train set up their run in one place (train/session.h), pretrained
// weights included: a tiny RoFormer pretrained for a few updates and exported
// to Hugging Face initializes a masked-LM run (model.init_from), and the
// bench's first updates are again those of `rotor train`, which both differ
// from the updates of a fresh model.
TEST_F(BenchTrain, SharesTheInitFromWeightsWithTraining) {
  const std::string mlm = std::string(R"(task: mlm
seed: 5
device: cpu
model:
  encoder_layers: 1
  d_model: 32
  n_heads: 4
  d_ff: 64
  activation: gelu
  layer_norm_eps: 1.0e-12
  position: rope
  max_positions: 48
data:
  train: )") + (dir_ / "data/train.en") +
                          R"(
  vocab_size: 120
  seq_len: 48
train:
  batch_size: 8
  log_interval: 1
optim:
  name: adamw
  lr: 3.0e-3
  warmup_updates: 2
)";
  std::ofstream(dir_ / "pre.yaml") << mlm << "output_dir: " << (dir_ / "pre") << "\n";
  auto r = rotor_run(dir_, "train " + (dir_ / "pre.yaml") + " --set train.max_updates=10");
  ASSERT_EQ(r.code, 0) << r.err;
  r = rotor_run(dir_,
                "export --checkpoint " + (dir_ / "pre") + " --format hf --output " + (dir_ / "hf"));
  ASSERT_EQ(r.code, 0) << r.err;
  // The tokenizer comes with the pretrained model (its spiece.model).
  std::string ft = mlm + "output_dir: " + (dir_ / "ft_bench") + "\n";
  const std::string positions = "  max_positions: 48\n";
  ft.insert(ft.find(positions) + positions.size(), "  init_from: " + (dir_ / "hf") + "\n");
  std::ofstream(dir_ / "ft.yaml") << ft;
  auto b = rotor_run(dir_, "bench train " + (dir_ / "ft.yaml") + " --steps 4 --warmup 0 --json " +
                               (dir_ / "bench.json"));
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.err.find("parameters from a Hugging Face roformer"), std::string::npos) << b.err;
  auto t =
      rotor_run(dir_, "train " + (dir_ / "ft.yaml") + " --set output_dir=" + (dir_ / "ft_train") +
                          " --set train.max_updates=4");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(slurp(dir_ / "ft_train/train.log").find("parameters from a Hugging Face roformer"),
            std::string::npos);
  const auto bench = rotor::json_io::load(dir_ / "bench.json").at("losses");
  const std::vector<double> train = train_losses(dir_ / "ft_train/metrics.jsonl");
  ASSERT_EQ(bench.size(), 4u);
  ASSERT_EQ(train.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_DOUBLE_EQ(train[i], bench[i].get<double>()) << "update " << i + 1;
  // The same run from fresh weights (the pretrained tokenizer kept) learns
  // from other losses: the bench above did load the pretrained ones.
  auto f =
      rotor_run(dir_, "bench train " + (dir_ / "ft.yaml") +
                          " --steps 1 --warmup 0 --set model.init_from= --set data.spm_model=" +
                          (dir_ / "hf/spiece.model") + " --json " + (dir_ / "fresh.json"));
  ASSERT_EQ(f.code, 0) << f.err;
  const double fresh = rotor::json_io::load(dir_ / "fresh.json").at("losses").at(0).get<double>();
  EXPECT_GT(std::abs(fresh - train[0]), 1e-3) << "pretrained " << train[0] << ", fresh " << fresh;
}

TEST_F(BenchTrain, RunsEmulatedBf16) {
  auto r = rotor_run(
      dir_, "bench train " + (dir_ / "tiny.yaml") + " --steps 2 --warmup 0 --set precision=bf16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("precision bf16"), std::string::npos) << r.out;
}

TEST_F(BenchTrain, BadArgumentsAreOneLineErrors) {
  auto r = rotor_run(dir_, "bench train " + (dir_ / "tiny.yaml") + " --steps 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--steps must be at least 1"), std::string::npos) << r.err;
  r = rotor_run(dir_, "bench train " + (dir_ / "missing.yaml"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("missing.yaml"), std::string::npos) << r.err;
  r = rotor_run(dir_, "bench train " + (dir_ / "tiny.yaml") + " --set model.d_model=-4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("d_model"), std::string::npos) << r.err;
}

}  // namespace
