// Data-parallel training without MPI (docs/distributed.md): `rotor launch`
// starts the ranks, they meet through the file rendezvous and all-reduce over
// Gloo. 2 and 4 ranks end with the weights of one process with the same
// global batch; a missing rank, a killed rank and SIGTERM end the job as they
// end an MPI job: a named error within dist.timeout_s, or a checkpoint and
// exit 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/dp_training.h"
#include "support/run_rotor.h"

namespace rotor {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Launch : public test::TinyTranslationRun {
 protected:
  void SetUp() override {
    if (!ROTOR_WITH_GLOO) GTEST_SKIP() << "built without Gloo (libgloo-dev): no launch without MPI";
    TinyTranslationRun::SetUp();
  }
  // Starts `rotor ARGS` in the background (stderr to err.txt); returns its pid.
  pid_t start(const std::string& args) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string cmd =
          "exec " + bin_ + " " + args + " >" + dir_ / "out.txt" + " 2>" + dir_ / "err.txt";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  // Waits up to `limit_s` for `pid`; its exit code (128 + signal), or -1 if
  // it was still running (then killed).
  static int finish(pid_t pid, double limit_s) {
    const auto t0 = Clock::now();
    int status = 0;
    while (seconds_since(t0) < limit_s) {
      if (waitpid(pid, &status, WNOHANG) == pid)
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  // Waits until metrics.jsonl of run `out` has a line: training is under way.
  bool wait_training(const std::string& out, double limit_s) {
    const auto t0 = Clock::now();
    while (seconds_since(t0) < limit_s) {
      if (test::slurp(dir_ / out + "/metrics.jsonl").find('\n') != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The pids of `parent`'s children.
  static std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream f(e.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(f)), {});
      const size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state;
      int ppid = 0;
      rest >> state >> ppid;
      if (ppid == parent) out.push_back(std::stoi(name));
    }
    return out;
  }
  std::string err() { return test::slurp(dir_ / "err.txt"); }
};

TEST_F(Launch, RanksEqualOneProcessWithTheSameGlobalBatch) {
  const std::string one = train("", "one", "--set train.update_freq=4");
  EXPECT_LE(test::max_weight_diff(one, launch(2, "two", "--set train.update_freq=2")), 1e-6);
  EXPECT_LE(test::max_weight_diff(one, launch(4, "four", "")), 1e-6);
  EXPECT_LE(test::max_weight_diff(one, launch(2, "two_sharded",
                                              "--set train.update_freq=2 "
                                              "--set dist.shard_optimizer=true")),
            1e-6);
  const std::string log = test::slurp(dir_ / "four/train.log");
  EXPECT_NE(log.find("4 rank(s) (gloo backend)"), std::string::npos) << log.substr(0, 2000);
  // Variable-length batches (data.packing documents) likewise, within the
  // round-off of summing the gradients in another order (1.4e-6 seen; a
  // wrong batch or layout moves a weight by about the learning rate, 2e-3).
  const std::string varlen = " --set data.packing=documents";
  EXPECT_LE(test::max_weight_diff(train("", "one_varlen", "--set train.update_freq=4" + varlen),
                                  launch(2, "two_varlen", "--set train.update_freq=2" + varlen)),
            1e-5);
  // Small buckets: launched during the backward, reduced by the worker thread.
  EXPECT_LE(
      test::max_weight_diff(
          one, launch(2, "two_buckets", "--set train.update_freq=2 --set dist.bucket_mb=0.01")),
      1e-6);
}

// A world of 2 started as one process (the other never comes), as srun would
// start it: the rendezvous names the missing rank within dist.timeout_s.
TEST_F(Launch, AMissingRankIsNamed) {
  for (const std::string rank : {"0", "1"}) {
    const auto t0 = Clock::now();
    const test::RunResult r = test::run_rotor(
        dir_,
        "train " + dir_ / "tiny.yaml" + " --set output_dir=" + dir_ / ("missing" + rank) +
            " --set dist.timeout_s=2",
        "RANK=" + rank + " WORLD_SIZE=2 ROTOR_RUN_ID=t" + rank);
    EXPECT_LT(seconds_since(t0), 20.0);
    EXPECT_NE(r.code, 0);
    // The default store: OUTPUT_DIR/.rendezvous.
    const std::string want = "rotor: error: rendezvous file:" + dir_ / ("missing" + rank) +
                             "/.rendezvous (run t" + rank + "): rank(s) " +
                             (rank == "0" ? "1" : "0") + " of 2 did not arrive within 2 s";
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
}

TEST_F(Launch, AKilledRankEndsTheJobNamingIt) {
  const auto t0 = Clock::now();
  const pid_t launcher =
      start("launch -n 2 -- train " + dir_ / "tiny.yaml" + " --set output_dir=" + dir_ / "killed" +
            " --set train.max_updates=100000 --set train.save_interval=0 --set dist.timeout_s=5");
  ASSERT_TRUE(wait_training("killed", 60)) << err();
  const std::vector<pid_t> ranks = children_of(launcher);
  ASSERT_EQ(ranks.size(), 2u);
  kill(ranks[1], SIGKILL);
  const int code = finish(launcher, 30);
  EXPECT_EQ(code, 128 + SIGKILL) << err();
  EXPECT_LT(seconds_since(t0), 90.0);
  const std::string e = err();
  EXPECT_NE(e.find("(pid " + std::to_string(ranks[1]) + ") was killed by signal 9"),
            std::string::npos)
      << e;
}

TEST_F(Launch, SigtermSavesAndExitsZero) {
  const pid_t launcher =
      start("launch -n 2 -- train " + dir_ / "tiny.yaml" + " --set output_dir=" + dir_ / "term" +
            " --set train.max_updates=100000 --set train.save_interval=0"
            " --set dist.shard_optimizer=true --set dist.timeout_s=20");
  ASSERT_TRUE(wait_training("term", 60)) << err();
  kill(launcher, SIGTERM);
  EXPECT_EQ(finish(launcher, 60), 0) << err();
  EXPECT_TRUE(fs::exists(dir_ / "term/checkpoint_last/model.safetensors"));
  const std::string log = test::slurp(dir_ / "term/train.log");
  EXPECT_NE(log.find("signal 15 received: saving a checkpoint"), std::string::npos) << log;
}

}  // namespace
}  // namespace rotor
