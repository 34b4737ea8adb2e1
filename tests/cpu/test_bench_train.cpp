// `rotor bench train` through the binary: the report, its JSON figures (the
// micro-batches the peer script replays), phases that add up to the step, no
// files written into the run directory, and clear errors for bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/json.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::TempDir;

using rotor::test::RunResult;
using rotor::test::slurp;

RunResult rotor_run(const TempDir& dir, const std::string& args) {
  return rotor::test::run_rotor(dir, args, "OMP_NUM_THREADS=1");
}

const char* kConfig = R"(task: translation
output_dir: RUN
seed: 3
device: cpu
model:
  encoder_layers: 1
  decoder_layers: 1
  d_model: 32
  n_heads: 2
  d_ff: 64
  position: rope
  max_positions: 256
data:
  train: DATA/train
  vocab_size: 120
  max_tokens: 256
  max_len_ratio: 20
train:
  max_updates: 100
  update_freq: 2
optim:
  lr: 1.0e-3
  warmup_updates: 4
)";

class BenchTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = rotor_run(dir_, "synth numbers-en-de --output " + (dir_ / "data") +
                                 " --train 300 --valid 20 --test 20 --test-long 10 --seed 2");
    ASSERT_EQ(r.code, 0) << r.err;
    std::string cfg = kConfig;
    cfg.replace(cfg.find("DATA/train"), 4, dir_ / "data");
    cfg.replace(cfg.find("RUN"), 3, dir_ / "run");
    std::ofstream(dir_ / "tiny.yaml") << cfg;
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

  const rotor::json::Value v = rotor::json::parse(slurp(dir_ / "bench.json"), "bench.json");
  EXPECT_EQ(v.at("task").as_string(), "translation");
  EXPECT_EQ(v.at("steps").as_int(), 4);
  EXPECT_EQ(v.at("warmup").as_int(), 1);
  EXPECT_GT(v.at("parameters").as_int(), 0);
  const int64_t tokens = v.at("tokens").as_int();
  EXPECT_GT(tokens, 0);
  EXPECT_GT(v.at("all_tokens").as_int(), tokens);  // source + target
  const double seconds = v.at("seconds").as_double();
  ASSERT_GT(seconds, 0);
  EXPECT_NEAR(v.at("tokens_per_s").as_double(), static_cast<double>(tokens) / seconds,
              1e-6 * static_cast<double>(tokens) / seconds);
  // Every micro-batch of the timed updates (4 updates x update_freq 2), with
  // the shapes the model saw; their target tokens add up to the total.
  const auto& batches = v.at("batches").as_array();
  ASSERT_EQ(batches.size(), 8u);
  int64_t sum = 0;
  for (const auto& b : batches) {
    EXPECT_GT(b.at("sequences").as_int(), 0);
    EXPECT_GT(b.at("src_len").as_int(), 0);
    EXPECT_GT(b.at("tgt_len").as_int(), 0);
    EXPECT_LE(b.at("sequences").as_int() * b.at("tgt_len").as_int(), 256);  // max_tokens
    sum += b.at("tokens").as_int();
  }
  EXPECT_EQ(sum, tokens);
  // On the CPU the phases come from the timed pass: they cover the step.
  const double step_ms = v.at("step_ms").as_double();
  double phases = 0;
  for (const char* p : {"data", "forward", "backward", "optimizer"}) {
    const double ms = v.at("phases").at(p).at("ms").as_double();
    EXPECT_GE(ms, 0) << p;
    phases += ms;
  }
  EXPECT_GT(v.at("phases").at("forward").at("ms").as_double(), 0);
  EXPECT_GT(v.at("phases").at("backward").at("ms").as_double(), 0);
  EXPECT_NEAR(phases, step_ms, 0.2 * step_ms + 1.0);
  EXPECT_LE(v.at("step_ms_min").as_double(), v.at("step_ms_max").as_double());
  // A benchmark writes no checkpoint, log or metrics.
  EXPECT_FALSE(fs::exists(dir_ / "run/checkpoints"));
  EXPECT_FALSE(fs::exists(dir_ / "run/metrics.jsonl"));
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
