// Data-parallel training equals one process): N MPI ranks training
// K updates end with the weights that one process gets with the same global
// batch (update_freq x N), with and without the sharded optimizer, with the
// default buckets and with many small ones (launched during backward, which
// train.log reports), and a run saved on 4 ranks resumes on 2 and on 1. Runs
// the rotor binary under mpirun.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "support/dp_training.h"

namespace rotor {
namespace {

std::string mpirun(int np) {
  return std::string(ROTOR_MPIEXEC) + " --oversubscribe --allow-run-as-root -np " +
         std::to_string(np) + " ";
}

double max_diff(const std::string& a, const std::string& b) {
  return test::max_weight_diff(a, b);
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

class DataParallel : public test::TinyTranslationRun {
 protected:
  void SetUp() override {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    TinyTranslationRun::SetUp();
  }
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
