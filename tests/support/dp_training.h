// Data-parallel training tests: a tiny translation run (numbers-en-de, one
// shared tokenizer) that N ranks and one process train from the same seed,
// and the comparison of their weights. Shared by tests/mpi (ranks from
// mpirun) and tests/dist (ranks from `rotor launch`).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "checkpoint/safetensors.h"
#include "support/test_util.h"

namespace rotor::test {

inline int run_quietly(const std::string& cmd) {
  const std::string full = cmd + " > /dev/null 2>&1";
  return std::system(full.c_str());
}

// Max |a - b| over all tensors of two weight files (same names and shapes).
inline double max_weight_diff(const std::string& a, const std::string& b) {
  checkpoint::NamedTensors ta = checkpoint::load_safetensors(a),
                           tb = checkpoint::load_safetensors(b);
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

// The data, the tokenizer and tiny.yaml (8 updates, a checkpoint every 4) in
// a fresh directory.
class TinyTranslationRun : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("OMP_NUM_THREADS", "1", 1);
    bin_ = ROTOR_BINARY;
    ASSERT_EQ(run_quietly(bin_ + " synth numbers-en-de --output " + dir_ / "data" +
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
    ASSERT_EQ(run_quietly(bin_ + " spm-train --input " + dir_ / "data/train.en" + " --input " +
                          dir_ / "data/train.de" + " --model-prefix " + dir_ / "spm" +
                          " --vocab-size 120"),
              0);
  }
  // `LAUNCHER rotor train tiny.yaml` into OUT (LAUNCHER: "" or "mpirun -np
  // 2 "); returns the final weights.
  std::string train(const std::string& launcher, const std::string& out, const std::string& sets) {
    return run_train(launcher + bin_ + " train ", out, sets);
  }
  // `rotor launch -n N -- train tiny.yaml` into OUT; returns the final weights.
  std::string launch(int n, const std::string& out, const std::string& sets) {
    return run_train(bin_ + " launch -q -n " + std::to_string(n) + " -- train ", out, sets);
  }
  std::string run_train(const std::string& train_command, const std::string& out,
                        const std::string& sets) {
    const std::string cmd =
        train_command + dir_ / "tiny.yaml" + " --set output_dir=" + dir_ / out + " " + sets;
    EXPECT_EQ(run_quietly(cmd), 0) << cmd;
    return dir_ / out + "/checkpoint_last/model.safetensors";
  }
  TempDir dir_;
  std::string bin_;
};

}  // namespace rotor::test
