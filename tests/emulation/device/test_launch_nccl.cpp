// `rotor launch` over NCCL, on the emulated device: rotor_emulated (the rotor
// command linked against device/runtime.cpp, device/cublaslt.cpp and
// device/nccl.cpp) trains the tiny translation run of tests/dist on cuda:0,
// as one process and as ranks that meet through the emulated NCCL. Every
// collective rotor's NCCL backend makes (the all-reduce of gradient buckets,
// during the backward and after it, reduce-scatter and all-gather of the
// sharded optimizer, the broadcast of the first weights) runs through
// src/parallel/nccl_communicator.cpp, its non-blocking start included, run
// at once and (ROTOR_EMU_STREAMS=lazy) as late as CUDA allows. The
// ranks end with the weights of one process with the same global batch,
// within the round-off of summing gradients in another order, as over Gloo
// on the CPU (tests/dist/test_launch.cpp); a wrong size, offset or stream
// order moves a weight by about the learning rate (1e-3).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "support/dp_training.h"
#include "support/run_rotor.h"

namespace rotor {
namespace {

class LaunchNccl : public test::TinyTranslationRun {
 protected:
  void SetUp() override {
    if (!ROTOR_WITH_GLOO) GTEST_SKIP() << "built without Gloo (libgloo-dev): no launch without MPI";
    TinyTranslationRun::SetUp();
    bin_ = ROTOR_EMULATED_BINARY;
    // One emulated GPU per rank, as NCCL requires (device/runtime.cpp).
    setenv("ROTOR_EMU_DEVICES", "4", 1);
  }
  void TearDown() override { unsetenv("ROTOR_EMU_DEVICES"); }
};

TEST_F(LaunchNccl, RanksEqualOneProcessWithTheSameGlobalBatch) {
  const std::string cuda = "--set device=cuda ";
  const std::string one = train("", "one", cuda + "--set train.update_freq=4");
  EXPECT_LE(test::max_weight_diff(one, launch(4, "four", cuda)), 1e-6);
  // 2 ranks with the collectives run at once, then queued on NCCL's stream
  // until something needs them (device/runtime.cpp): at once, a collective
  // that reads a gradient before it is written fails; lazily, a result used
  // before it is waited for, or a buffer written or freed while queued.
  // Sharded: reduce-scatter and all-gather; buckets: all-reduces started
  // during the backward.
  for (const char* order : {"eager", "lazy"}) {
    setenv("ROTOR_EMU_STREAMS", order, 1);
    for (const auto& [name, sets] : {std::pair<std::string, std::string>{"plain", ""},
                                     {"sharded", "--set dist.shard_optimizer=true"},
                                     {"buckets", "--set dist.bucket_mb=0.01"}}) {
      const std::string out = std::string("two_") + order + "_" + name;
      EXPECT_LE(
          test::max_weight_diff(one, launch(2, out, cuda + "--set train.update_freq=2 " + sets)),
          1e-6)
          << out;
    }
  }
  unsetenv("ROTOR_EMU_STREAMS");
  const std::string log = test::slurp(dir_ / "two_eager_plain/train.log");
  EXPECT_NE(log.find("2 rank(s) (nccl backend)"), std::string::npos) << log.substr(0, 2000);
  // Variable-length batches, within the round-off of another order of sums.
  const std::string varlen = "--set data.packing=documents ";
  EXPECT_LE(
      test::max_weight_diff(train("", "one_varlen", cuda + varlen + "--set train.update_freq=4"),
                            launch(2, "two_varlen", cuda + varlen + "--set train.update_freq=2")),
      1e-5);
}

// More ranks than GPUs on the node: one line from each rank, before NCCL
// (which stops at "Duplicate GPU detected" with a bare "invalid usage"),
// and `rotor launch` fails.
TEST_F(LaunchNccl, MoreRanksThanGpusIsOneClearLine) {
  setenv("ROTOR_EMU_DEVICES", "1", 1);
  const std::string cmd = bin_ + " launch -n 2 -- train " + dir_ / "tiny.yaml" +
                          " --set device=cuda --set output_dir=" + dir_ / "shared" +
                          " >/dev/null 2>" + dir_ / "err.txt";
  EXPECT_NE(std::system(cmd.c_str()), 0) << cmd;
  const std::string err = test::slurp(dir_ / "err.txt");
  EXPECT_NE(
      err.find("2 ranks on this node (env) but 1 GPU(s) visible: NCCL takes one GPU per rank"),
      std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "shared/checkpoints")) << "nothing trained";
}

}  // namespace
}  // namespace rotor
