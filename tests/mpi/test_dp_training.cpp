// Data-parallel training equals one process (issue 8): N MPI ranks training
// K updates end with the weights that one process gets with the same global
// batch (update_freq x N), with and without the sharded optimizer, with the
// default buckets and with many small ones (launched during backward, which
// train.log reports), and a run saved on 4 ranks resumes on 2 and on 1. Runs
// the rotor binary under mpirun.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "support/test_util.h"
#include "checkpoint/safetensors.h"

namespace rotor {
namespace {
using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

namespace fs = std::filesystem;

int run(const std::string& cmd) {
  const std::string full = cmd + " > /dev/null 2>&1";
  return std::system(full.c_str());
}

std::string mpirun(int np) {
  return std::string(ROTOR_MPIEXEC) + " --oversubscribe --allow-run-as-root -np " +
         std::to_string(np) + " ";
}

// Max |a - b| over all tensors of two weight files (same names and shapes).
double max_diff(const std::string& a, const std::string& b) {
  NamedTensors ta = load_safetensors(a), tb = load_safetensors(b);
  EXPECT_EQ(ta.size(), tb.size());
  double worst = 0;
  for (size_t i = 0; i < ta.size() && i < tb.size(); ++i) {
    EXPECT_EQ(ta[i].first, tb[i].first);
    auto x = ta[i].second.to_floats(), y = tb[i].second.to_floats();
    EXPECT_EQ(x.size(), y.size());
    for (size_t j = 0; j < x.size() && j < y.size(); ++j)
      worst = std::max(worst, static_cast<double>(std::abs(x[j] - y[j])));
  }
  return worst;
}

// From train.log of a run: {buckets, launched during backward}, or {-1, -1}.
std::pair<int, int> bucket_report(const std::string& log_path) {
  std::ifstream in(log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::smatch m;
  static const std::regex re(
      R"(gradient all-reduce: (\d+) bucket\(s\) of ~\S+ MiB, (\d+) launched during backward)");
  if (!std::regex_search(text, m, re)) return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    bin_ = ROTOR_BINARY;
    ASSERT_EQ(run(bin_ + " synth numbers-en-de --output " + dir_ / "data" +
                  " --train 400 --valid 50 --test 50 --test-long 20"),
              0);
    std::ofstream(dir_ / "tiny.yaml")
        << "task: translation\nseed: 3\ndevice: cpu\n"
           "model: {encoder_layers: 1, decoder_layers: 1, d_model: 32, n_heads: 2, d_ff: 64,"
           " dropout: 0.1, position: rope, max_positions: 128}\n"
           "data: {train: "
        << dir_ / "data/train"
        << ", vocab_size: 120, max_tokens: 256,"
           " max_len_ratio: 20, prefetch: 0, spm_model: "
        << dir_ / "spm.model"
        << "}\n"
           "train: {max_updates: 8, log_interval: 1, valid_interval: 0, save_interval: 4}\n"
           "optim: {lr: 1.0e-3, warmup_updates: 2}\n";
    // The tokenizer is trained once, so that every run shares it.
    ASSERT_EQ(run(bin_ + " spm-train --input " + dir_ / "data/train.en" + " --input " +
                  dir_ / "data/train.de" + " --model-prefix " + dir_ / "spm" + " --vocab-size 120"),
              0);
  }
  std::string train(const std::string& launcher, const std::string& out, const std::string& sets) {
    const std::string cmd = launcher + bin_ + " train " + dir_ / "tiny.yaml" +
                            " --set output_dir=" + dir_ / out + " " + sets;
    EXPECT_EQ(run(cmd), 0) << cmd;
    return dir_ / out + "/checkpoint_last/model.safetensors";
  }
  test::TempDir dir_;
  std::string bin_;
};

TEST_F(DataParallel, RanksEqualOneProcessWithTheSameGlobalBatch) {
  const std::string one = train("", "one", "--set train.update_freq=4");
  EXPECT_LE(max_diff(one, train(mpirun(2), "two", "--set train.update_freq=2")), 1e-6);
  EXPECT_LE(max_diff(one, train(mpirun(4), "four", "")), 1e-6);
  EXPECT_LE(max_diff(one, train(mpirun(4), "four_sharded", "--set dist.shard_optimizer=true")),
            1e-6);
  EXPECT_LE(max_diff(one, train(mpirun(2), "two_sharded",
                                "--set train.update_freq=2 --set dist.shard_optimizer=true")),
            1e-6);
  // The default 25 MiB: the whole tiny model is one bucket, launched when the
  // embedding (the last parameter backward finishes) is reported.
  EXPECT_EQ(bucket_report(dir_ / "four/train.log"), std::make_pair(1, 1));
}

TEST_F(DataParallel, SmallBucketsEqualOneProcess) {
  const std::string one = train("", "one", "--set train.update_freq=4");
  // ~10 KiB buckets: a dozen of them for the ~26k parameters.
  const std::string two =
      train(mpirun(2), "two_buckets", "--set train.update_freq=2 --set dist.bucket_mb=0.01");
  EXPECT_LE(max_diff(one, two), 1e-6);
  const std::string four = train(mpirun(4), "four_buckets", "--set dist.bucket_mb=0.01");
  EXPECT_LE(max_diff(one, four), 1e-6);
  for (const char* run : {"two_buckets", "four_buckets"}) {
    const auto [buckets, launched] = bucket_report(dir_ / (std::string(run) + "/train.log"));
    EXPECT_GT(buckets, 5) << run;
    EXPECT_EQ(launched, buckets) << run << ": every bucket launched during backward";
  }
}

TEST_F(DataParallel, CheckpointsResumeOnAnotherWorldSize) {
  const std::string one = train("", "one", "--set train.update_freq=4");
  // 4 ranks (sharded optimizer) stop after 4 updates; 2 ranks, then 1, go on.
  train(mpirun(4), "resumed", "--set dist.shard_optimizer=true --set train.max_updates=4");
  train(mpirun(2), "resumed",
        "--resume --set train.update_freq=2 --set dist.shard_optimizer=true --set "
        "train.max_updates=6");
  const std::string resumed = train("", "resumed", "--resume --set train.update_freq=4");
  EXPECT_LE(max_diff(one, resumed), 1e-6);
}

}  // namespace
}  // namespace rotor
