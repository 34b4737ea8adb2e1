// Rank discovery and the file rendezvous without MPI (docs/distributed.md):
// the launchers' environments (SLURM, torchrun-style, MPI first), the
// transport each one gets, the file store, and the join protocol between
// processes (forked here): timeouts that name the missing rank, two jobs in
// one directory, a stale directory from a crashed job, and the NCCL unique id
// (a fake one: no GPU needed) shared through the store.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "parallel/environment.h"
#include "parallel/file_store.h"
#include "parallel/rendezvous.h"
#include "support/test_util.h"

namespace rotor::parallel {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Every variable detect_environment reads, unset for the test's duration.
class Env : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "PMI_RANK",
                          "PMI_SIZE",
                          "MPI_LOCALRANKID",
                          "MPI_LOCALNRANKS",
                          "RANK",
                          "WORLD_SIZE",
                          "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE",
                          "SLURM_PROCID",
                          "SLURM_NTASKS",
                          "SLURM_LOCALID",
                          "SLURM_NODEID",
                          "SLURM_STEP_TASKS_PER_NODE",
                          "SLURM_TASKS_PER_NODE",
                          "SLURM_NTASKS_PER_NODE",
                          "SLURM_JOB_ID",
                          "SLURM_STEP_ID",
                          "SLURM_RESTART_COUNT",
                          "PMIX_RANK",
                          "ROTOR_RUN_ID",
                          "ROTOR_RENDEZVOUS",
                          "TORCHELASTIC_RUN_ID"})
      unsetenv(v);
  }
};

TEST_F(Env, SingleProcess) {
  const DistEnvironment e = detect_environment();
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.launcher, "none");
  EXPECT_EQ(e.run_id, "default");
  EXPECT_FALSE(e.mpi_launched);
  EXPECT_EQ(plan_transport(e, "auto", "runs/x/.rendezvous", true).transport, Transport::Local);
  EXPECT_EQ(plan_transport(e, "file:/tmp/x", "", true).transport, Transport::Local);
}

TEST_F(Env, Slurm) {
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "4(x2)", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  setenv("SLURM_STEP_ID", "3", 1);
  DistEnvironment e = detect_environment();
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_FALSE(e.single_node());
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.run_id, "slurm-4242.3");
  // srun without an MPI plugin: the store in the output directory.
  EXPECT_FALSE(e.mpi_launched);
  TransportPlan p = plan_transport(e, "auto", "/shared/run/.rendezvous", true);
  EXPECT_EQ(p.transport, Transport::FileStore);
  EXPECT_EQ(p.dir, "/shared/run/.rendezvous");
  p = plan_transport(e, "file:/scratch/rdzv", "/shared/run/.rendezvous", true);
  EXPECT_EQ(p.dir, "/scratch/rdzv");
  EXPECT_THROW(plan_transport(e, "mpi", "", true), Error);  // no MPI launcher
  // srun --mpi=pmix: MPI, unless the config names a store.
  setenv("PMIX_RANK", "5", 1);
  e = detect_environment();
  EXPECT_TRUE(e.mpi_launched);
  EXPECT_EQ(plan_transport(e, "auto", "/shared/run/.rendezvous", true).transport, Transport::Mpi);
  EXPECT_EQ(plan_transport(e, "auto", "/shared/run/.rendezvous", false).transport,
            Transport::FileStore);  // a build without MPI
  EXPECT_EQ(plan_transport(e, "file:/d", "", true).transport, Transport::FileStore);
  // A requeued job is another run.
  setenv("SLURM_RESTART_COUNT", "2", 1);
  EXPECT_EQ(detect_environment().run_id, "slurm-4242.3.r2");
  // One node, tasks counted by SLURM_TASKS_PER_NODE.
  unsetenv("SLURM_STEP_TASKS_PER_NODE");
  setenv("SLURM_TASKS_PER_NODE", "8", 1);
  setenv("SLURM_NODEID", "0", 1);
  e = detect_environment();
  EXPECT_EQ(e.local_size, 8);
  EXPECT_TRUE(e.single_node());
}

TEST_F(Env, SlurmTasksPerNode) {
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), -1);
  EXPECT_EQ(slurm_tasks_on_node("8", 0), 8);
  EXPECT_EQ(slurm_tasks_on_node("3,5", 1), 5);
  EXPECT_EQ(slurm_tasks_on_node("x", 0), -1);
  EXPECT_EQ(slurm_tasks_on_node("2(y3)", 0), -1);
}

TEST_F(Env, TorchrunStyle) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("TORCHELASTIC_RUN_ID", "none", 1);
  DistEnvironment e = detect_environment();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.launcher, "env");
  EXPECT_EQ(e.run_id, "default");  // torchrun's placeholder id names no run
  setenv("TORCHELASTIC_RUN_ID", "job/7", 1);
  EXPECT_EQ(detect_environment().run_id, "torch-job_7");  // a path component
  // RANK/WORLD_SIZE win over the allocation's SLURM variables.
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "1", 1);
  EXPECT_EQ(detect_environment().launcher, "env");
  // rotor launch: its store and run id.
  setenv("ROTOR_RENDEZVOUS", "file:/tmp/rotor-launch-abc", 1);
  setenv("ROTOR_RUN_ID", "0123abcd", 1);
  e = detect_environment();
  EXPECT_EQ(e.run_id, "0123abcd");
  TransportPlan p = plan_transport(e, "auto", "/out/.rendezvous", true);
  EXPECT_EQ(p.transport, Transport::FileStore);
  EXPECT_EQ(p.dir, "/tmp/rotor-launch-abc");
  EXPECT_EQ(plan_transport(e, "file:/cfg", "/out", true).dir, "/cfg");  // the config wins
  // rotor launch -n 1: the data-parallel path with one rank.
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  EXPECT_EQ(plan_transport(detect_environment(), "auto", "", true).transport, Transport::FileStore);
  setenv("ROTOR_RENDEZVOUS", "nonsense", 1);
  EXPECT_THROW(plan_transport(detect_environment(), "auto", "", true), Error);
  // Malformed values name the variable.
  setenv("WORLD_SIZE", "two", 1);
  try {
    detect_environment();
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("WORLD_SIZE='two'"), std::string::npos) << err.what();
  }
  setenv("WORLD_SIZE", "3", 1);
  setenv("RANK", "3", 1);
  EXPECT_THROW(detect_environment(), Error);  // rank outside the world
}

TEST_F(Env, MpiLaunchersComeFirst) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("PMI_RANK", "2", 1);
  setenv("PMI_SIZE", "4", 1);
  DistEnvironment e = detect_environment();
  EXPECT_EQ(e.launcher, "pmi");
  EXPECT_EQ(e.rank, 2);
  EXPECT_TRUE(e.mpi_launched);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  e = detect_environment();
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 3);
  EXPECT_TRUE(e.single_node());
  EXPECT_EQ(plan_transport(e, "auto", "/out", true).transport, Transport::Mpi);
  EXPECT_EQ(plan_transport(e, "mpi", "", true).transport, Transport::Mpi);
  EXPECT_THROW(plan_transport(e, "mpi", "", false), Error);  // built without MPI
  EXPECT_EQ(plan_transport(e, "auto", "/out", false).transport, Transport::FileStore);
  EXPECT_EQ(plan_transport(e, "file:/x", "/out", true).transport, Transport::FileStore);
  EXPECT_THROW(plan_transport(e, "file:", "", true), Error);
  EXPECT_THROW(plan_transport(e, "tcp://host:1", "", true), Error);
}

TEST_F(Env, NoStoreDirectory) {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  try {
    plan_transport(detect_environment(), "auto", "", true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.rendezvous: file:DIR"), std::string::npos);
  }
}

// ---- the store ------------------------------------------------------------------

TEST(FileStore, SetGetWait) {
  test::TempDir dir;
  FileStore s(dir / "a/b");  // parents created
  EXPECT_FALSE(s.get("k").has_value());
  s.set("k", std::string("v\0x", 3));
  EXPECT_EQ(*s.get("k"), std::string("v\0x", 3));
  s.set("k", "w");  // replaced
  EXPECT_EQ(*s.get("k"), "w");
  // Keys with separators and leading dots stay inside the directory.
  s.set("../escape/.k", "x");
  EXPECT_EQ(*s.get("../escape/.k"), "x");
  EXPECT_EQ(fs::path(s.path_of("../escape/.k")).parent_path(), fs::path(dir / "a/b"));
  EXPECT_FALSE(fs::exists(dir / "a/escape"));
  // No temporaries left behind.
  for (const auto& entry : fs::directory_iterator(dir / "a/b"))
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
  // wait: what is missing after the timeout, within it.
  const auto t0 = Clock::now();
  auto missing = s.wait({"k", "late", "never"}, 0.3);
  EXPECT_EQ(missing, (std::vector<std::string>{"late", "never"}));
  EXPECT_GE(seconds_since(t0), 0.3);
  EXPECT_LT(seconds_since(t0), 2.0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    FileStore(dir / "a/b").set("late", "1");
  });
  EXPECT_EQ(s.get_wait("late", 5.0).value_or(""), "1");
  writer.join();
  EXPECT_TRUE(s.remove("late"));
  EXPECT_FALSE(s.get("late").has_value());
  EXPECT_FALSE(s.get_wait("late", 0.05).has_value());
}

TEST(FileStore, SetRecreatesAVanishedDirectory) {
  test::TempDir dir;
  FileStore s(dir / "run");
  fs::remove_all(dir / "run");
  s.set("k", "v");
  EXPECT_EQ(*s.get("k"), "v");
}

// ---- the join protocol between processes -----------------------------------------

// Runs fn(rank) in `n` forked processes; returns their exit codes. A child's
// rotor::Error message goes to `dir`/err-RANK.
std::vector<int> run_ranks(const test::TempDir& dir, const std::vector<int>& ranks,
                           const std::function<int(int)>& fn) {
  std::vector<pid_t> pids;
  for (int r : ranks) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        code = fn(r);
      } catch (const std::exception& e) {
        std::ofstream(dir / ("err-" + std::to_string(r))) << e.what();
        code = 3;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(Rendezvous, RanksMeetAndShareTheNcclId) {
  test::TempDir dir;
  const std::vector<int> codes = run_ranks(dir, {3, 1, 0, 2}, [&](int r) {
    // Staggered arrivals: rank 0 comes last but one.
    std::this_thread::sleep_for(std::chrono::milliseconds(r == 0 ? 150 : 40 * r));
    Rendezvous rv(dir / "rdzv", "job1", r, 4, 10.0);
    // A fake 128-byte ncclUniqueId with zero bytes in it.
    std::string id(128, '\0');
    if (r == 0)
      for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 37) % 256);
    const std::string got = share_bytes(rv, "nccl-id", 0, r == 0 ? id : std::string());
    std::string want(128, '\0');
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>((i * 37) % 256);
    if (got != want) return 10;
    // The session store is shared by the job and starts empty.
    rv.store().set("hello-" + std::to_string(r), "x");
    if (!rv.store().wait({"hello-0", "hello-1", "hello-2", "hello-3"}, 10.0).empty()) return 11;
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
  for (int r : {0, 1, 2, 3})
    EXPECT_FALSE(fs::exists(dir / ("err-" + std::to_string(r))))
        << read_text(dir / ("err-" + std::to_string(r)));
  // The last rank to finish removed the run's directory.
  EXPECT_FALSE(fs::exists(dir / "rdzv/job1"));
}

TEST(Rendezvous, AMissingRankIsNamedWithinTheTimeout) {
  test::TempDir dir;
  const auto t0 = Clock::now();
  // World of 3; rank 1 never comes.
  const std::vector<int> codes = run_ranks(dir, {0, 2}, [&](int r) {
    Rendezvous rv(dir / "rdzv", "job", r, 3, 1.0);
    return 0;
  });
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(codes, (std::vector<int>{3, 3}));
  EXPECT_EQ(read_text(dir / "err-0"), "rendezvous file:" + dir / "rdzv" +
                                          " (run job): rank(s) 1 of 3 did not arrive within 1 s");
  EXPECT_EQ(read_text(dir / "err-2"), "rendezvous file:" + dir / "rdzv" +
                                          " (run job): rank(s) 1 of 3 did not arrive within 1 s");
  // Rank 0 missing: the others name it.
  const std::vector<int> c2 = run_ranks(dir, {1}, [&](int r) {
    Rendezvous rv(dir / "rdzv", "job2", r, 2, 0.5);
    return 0;
  });
  EXPECT_EQ(c2, (std::vector<int>{3}));
  EXPECT_NE(read_text(dir / "err-1").find("rank(s) 0 of 2 did not arrive within"),
            std::string::npos)
      << read_text(dir / "err-1");
}

TEST(Rendezvous, TwoJobsInOneDirectoryDoNotMix) {
  test::TempDir dir;
  // Job A (2 ranks) and job B (3 ranks) at once, same directory: each sees
  // only its own ranks and its own session.
  const std::vector<int> codes = run_ranks(dir, {0, 1, 10, 11, 12}, [&](int id) {
    const bool a = id < 10;
    const int r = a ? id : id - 10;
    Rendezvous rv(dir / "rdzv", a ? "A" : "B", r, a ? 2 : 3, 10.0);
    rv.store().set("who-" + std::to_string(r), a ? "A" : "B");
    const int n = a ? 2 : 3;
    for (int q = 0; q < n; ++q) {
      auto v = rv.store().get_wait("who-" + std::to_string(q), 10.0);
      if (!v || *v != (a ? "A" : "B")) return 12;
    }
    if (rv.store().get_wait("who-" + std::to_string(n), 0.2)) return 13;  // none of the other job
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0, 0}));
}

TEST(Rendezvous, AStaleDirectoryDoesNotConfuseANewJob) {
  test::TempDir dir;
  // What a crashed job with the same run id left: arrivals, a `go` that lists
  // its ranks' nonces, a session with an old NCCL id and Gloo addresses.
  {
    FileStore run(dir / "rdzv/job");
    run.set("arrive-0", "aaaa");
    run.set("arrive-1", "bbbb");
    run.set("go", "aaaa\naaaa bbbb");
    FileStore old_session(dir / "rdzv/job/s-aaaa");
    old_session.set("nccl-id", "stale");
  }
  // Rank 1 of the new job arrives first and must neither take the stale `go`
  // nor lose its arrival when rank 0 moves the stale directory aside.
  const std::vector<int> codes = run_ranks(dir, {1, 0}, [&](int r) {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Rendezvous rv(dir / "rdzv", "job", r, 2, 10.0);
    const std::string id = share_bytes(rv, "nccl-id", 0, r == 0 ? "fresh" : "");
    return id == "fresh" ? 0 : 14;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_FALSE(fs::exists(dir / "rdzv/job"));
}

TEST(Rendezvous, SharedBytesTimeOutNamingTheRoot) {
  test::TempDir dir;
  const std::vector<int> codes = run_ranks(dir, {0, 1}, [&](int r) {
    Rendezvous rv(dir / "rdzv", "job", r, 2, 0.5);
    if (r == 0) return 0;  // the root never publishes
    share_bytes(rv, "nccl-id", 0, "");
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 3}));
  EXPECT_NE(read_text(dir / "err-1").find("rank 0 did not publish nccl-id within"),
            std::string::npos)
      << read_text(dir / "err-1");
}

}  // namespace
}  // namespace rotor::parallel
