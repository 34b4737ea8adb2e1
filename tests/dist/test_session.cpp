// train/session.h over two ranks: each rank of a local job asks for its own
// GPU (parallel::rank_device, the one place that maps a launcher's local rank
// to a device), and the session it builds is one run over both ranks. The
// ranks are two processes that meet through the file rendezvous and Gloo, as
// under `rotor launch -n 2`; a CPU has no device index, so the session is
// given a stand-in for two GPUs (train::DeviceAccess) that records the index
// each rank asks for and computes on the CPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "config/config.h"
#include "core/tensor.h"
#include "parallel/environment.h"
#include "support/dp_training.h"
#include "support/run_rotor.h"
#include "train/session.h"

namespace rotor {
namespace {

TEST(RankDevice, OneGpuPerLocalRankAndTheAskedDeviceAlone) {
  parallel::DistEnvironment one;
  EXPECT_EQ(parallel::rank_device(Device::cuda(1), one, 2), Device::cuda(1)) << "kept when alone";
  EXPECT_EQ(parallel::rank_device(Device::cpu(), one, 2), Device::cpu());
  parallel::DistEnvironment job;
  job.world_size = 8;
  job.local_size = 4;
  for (int local = 0; local < 4; ++local) {
    job.rank = 4 + local;
    job.local_rank = local;
    EXPECT_EQ(parallel::rank_device(Device::cuda(0), job, 4), Device::cuda(local));
    EXPECT_EQ(parallel::rank_device(Device::cuda(0), job, 8), Device::cuda(local));
    EXPECT_EQ(parallel::rank_device(Device::cpu(), job, 4), Device::cpu());
    EXPECT_EQ(parallel::rank_device(Device::cpu(), job, 2), Device::cpu()) << "a CPU job";
  }
  // More ranks on the node than GPUs: NCCL would stop at "Duplicate GPU
  // detected" (ncclInvalidUsage); rotor says why first.
  job.launcher = "env";
  try {
    parallel::rank_device(Device::cuda(0), job, 2);
    ADD_FAILURE() << "4 ranks on 2 GPUs: an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rank 7: 4 ranks on this node (env) but 2 GPU(s) visible: "
                                         "NCCL takes one GPU per rank"),
              std::string::npos)
        << e.what();
  }
  // A launcher that does not say how many ranks share the node (local_size
  // 1) but gives a local rank past the GPUs.
  job.local_size = 1;
  job.local_rank = 3;
  EXPECT_THROW(parallel::rank_device(Device::cuda(0), job, 2), std::exception);
  try {
    parallel::rank_device(Device::cuda(0), job, 0);
    ADD_FAILURE() << "no GPU answers: an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rank 7: device cuda:0 asked for but no GPU answers"),
              std::string::npos)
        << e.what();
  }
}

class SessionRanks : public test::TinyTranslationRun {
 protected:
  void SetUp() override {
    if (!ROTOR_WITH_GLOO) GTEST_SKIP() << "built without Gloo (libgloo-dev): no file rendezvous";
    TinyTranslationRun::SetUp();
  }

  // Rank `rank` of 2 on a node of `gpus` stand-in GPUs, in a child process:
  // joins, builds, makes one update and writes what it saw to rank_R.txt.
  pid_t start_rank(int rank, int gpus) {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    const std::string r = std::to_string(rank);
    std::freopen((dir_ / ("rank_" + r + ".err")).c_str(), "w", stderr);
    setenv("RANK", r.c_str(), 1);
    setenv("LOCAL_RANK", r.c_str(), 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("ROTOR_RENDEZVOUS", ("file:" + dir_ / "rendezvous").c_str(), 1);
    setenv("ROTOR_RUN_ID", ("session-" + std::to_string(gpus)).c_str(), 1);
    try {
      const Config c = load_config(
          dir_ / "tiny.yaml", {"device=cuda", "dist.timeout_s=60", "output_dir=" + dir_ / "run"});
      int asked = -1;
      train::SessionOptions o;
      o.devices.count = [gpus] { return gpus; };
      o.devices.bind = [&asked](Device gpu) {
        asked = gpu.index;
        return Device::cpu();
      };
      train::Session session(c, o);
      session.build();
      checkpoint::TrainerState state;
      const train::UpdateResult u = session.step().run(state);
      const Tensor values = session.params().values();  // [numel] f32 masters
      double sum = 0;
      for (int64_t i = 0; i < values.numel(); ++i) sum += values.data<float>()[i];
      std::ofstream(dir_ / ("rank_" + r + ".txt"))
          << asked << " " << session.rank() << " " << session.world() << " "
          << session.comm().backend() << " " << fmt::format("{:.17g} {:.17g}", u.sums.loss, sum)
          << "\n";
      std::fflush(nullptr);
      _exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      std::fflush(nullptr);
      _exit(1);
    }
  }

  // Waits up to a minute for `pid`; its exit code, or -1 (then killed).
  static int finish(pid_t pid) {
    int status = 0;
    for (int i = 0; i < 3000; ++i) {
      if (waitpid(pid, &status, WNOHANG) == pid)
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }

  struct Seen {
    int asked = -2, rank = -1, world = 0;
    std::string backend, loss, weights;
  };
  Seen read_rank(int rank) {
    Seen s;
    std::istringstream in(test::slurp(dir_ / ("rank_" + std::to_string(rank) + ".txt")));
    in >> s.asked >> s.rank >> s.world >> s.backend >> s.loss >> s.weights;
    return s;
  }
};

TEST_F(SessionRanks, EachLocalRankAsksForItsOwnGpu) {
  const pid_t r0 = start_rank(0, 2), r1 = start_rank(1, 2);
  EXPECT_EQ(finish(r0), 0) << test::slurp(dir_ / "rank_0.err");
  EXPECT_EQ(finish(r1), 0) << test::slurp(dir_ / "rank_1.err");
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    const Seen s = read_rank(rank);
    EXPECT_EQ(s.asked, rank) << "rank r of a 2-rank local job asks for GPU r";
    EXPECT_EQ(s.rank, rank);
    EXPECT_EQ(s.world, 2);
    EXPECT_EQ(s.backend, "gloo");
  }
  // One run over both ranks: the update's loss is summed over them and the
  // weights (rank 0's, broadcast, then updated alike) are the same.
  const Seen a = read_rank(0), b = read_rank(1);
  EXPECT_FALSE(a.loss.empty());
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.weights, b.weights);
}

}  // namespace
}  // namespace rotor
