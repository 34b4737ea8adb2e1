// Checkpoints end to end through the rotor binary (docs/design.md, "Randomness" and "Checkpoints
// and run directories"): a resumed run continues bitwise exactly, a SIGKILLed run resumes from its
// last checkpoint without torn or leftover directories, `rotor translate`
// reads trained and averaged checkpoints, and `rotor average` is exact.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/safetensors.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

namespace {

namespace fs = std::filesystem;
using rotor::test::TempDir;

using rotor::test::run_rotor;
using rotor::test::RunResult;
using rotor::test::slurp;

// Synthesizes the data and writes the config; one per test (ctest runs each
// test in its own process).
class TrainResume : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = run_rotor(dir_, rotor::test::synth_args(dir_ / "data", {300, 50, 50, 20, 5}));
    ASSERT_EQ(r.code, 0) << r.err;
    // The tiny translator with dropout, so that the dropout streams must be
    // restored exactly; decoded by beam search.
    rotor::test::tiny_translation(dir_ / "data", "unused")
        .set("seed", "7")
        .set("model.dropout", "0.1")
        .set("model.attention_dropout", "0.1")
        .set("data.max_tokens", "256")
        .set("train.max_updates", "10")
        .set("train.valid_interval", "5")
        .set("train.save_interval", "5")
        .set("train.keep_last", "2")
        .set("optim.warmup_updates", "4")
        .set("decode.beam", "2")
        .set("decode.max_len_a", "1.5")
        .set("decode.max_len_b", "5")
        .write(dir_ / "tiny.yaml");
  }

  // `rotor train tiny.yaml` into RUN with extra arguments.
  RunResult train(const std::string& run, const std::string& extra = "") {
    return run_rotor(
        dir_, "train " + (dir_ / "tiny.yaml") + " --set output_dir=" + (dir_ / run) + " " + extra);
  }

  TempDir dir_;
};

// step -> the JSON text of the train loss, from metrics.jsonl (a step logged
// twice, before a kill and after the resume, must log the same text).
std::map<int64_t, std::string> train_losses(const std::string& metrics_path) {
  // The JSON text of the value of "key" in a flat record ("" when absent).
  auto field = [](const std::string& line, const std::string& key) {
    size_t p = line.find("\"" + key + "\":");
    if (p == std::string::npos) return std::string();
    p = line.find_first_not_of(' ', p + key.size() + 3);
    return line.substr(p, line.find_first_of(",}", p) - p);
  };
  std::map<int64_t, std::string> out;
  std::ifstream f(metrics_path);
  for (std::string line; std::getline(f, line);) {
    if (field(line, "split") != "\"train\"") continue;
    const std::string step = field(line, "step"), loss = field(line, "loss");
    EXPECT_FALSE(step.empty() || loss.empty()) << line;
    if (step.empty() || loss.empty()) continue;
    auto [it, fresh] = out.emplace(std::stoll(step), loss);
    EXPECT_TRUE(fresh || it->second == loss)
        << "step " << step << " logged twice with different losses: " << it->second << " vs "
        << loss;
  }
  return out;
}

// Every tensor of two safetensors files, bitwise.
void expect_same_tensors(const std::string& a, const std::string& b) {
  rotor::checkpoint::SafetensorsFile fa(a), fb(b);
  ASSERT_EQ(fa.names(), fb.names()) << a << " vs " << b;
  for (const auto& name : fa.names()) {
    rotor::Tensor ta = fa.load(name), tb = fb.load(name);
    ASSERT_EQ(ta.shape(), tb.shape()) << name;
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << name;
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0)
        << name << " differs: " << a << " vs " << b;
  }
}

std::vector<int64_t> step_dirs(const std::string& run) {
  std::vector<int64_t> steps;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0 && name.find('.') == std::string::npos)
      steps.push_back(std::stoll(name.substr(5)));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// Every file a checkpoint holds, and weights that parse.
void expect_complete_checkpoint(const std::string& dir, bool with_optimizer = true) {
  for (const char* f : {"model.safetensors", "trainer_state.json", "config.yaml", "spm.model"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << dir << " lacks " << f;
  EXPECT_EQ(fs::exists(dir + "/optimizer.safetensors"), with_optimizer) << dir;
  EXPECT_NO_THROW(rotor::checkpoint::SafetensorsFile(dir + "/model.safetensors")) << dir;
}

std::vector<std::string> leftovers(const std::string& run) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(run)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos)
      found.push_back(e.path().string());
  }
  return found;
}

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// (a) 10 updates in one go == 5 updates, then --resume to 10: the same losses
// for steps 6..10 (same JSON text) and bitwise the same weights and moments.
// With update_freq 3 the 30 micro-batches span 3 epochs (about 12 batches
// each) and the checkpoint falls in the middle of the second.
TEST_F(TrainResume, ResumeIsBitwiseExact) {
  const std::string accumulate = " --set train.update_freq=3";
  auto r = train("full", accumulate);
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("split", accumulate + " --set train.max_updates=5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(step_dirs(dir_ / "split"), (std::vector<int64_t>{5}));
  r = train("split", accumulate + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;

  const auto full = train_losses(dir_ / "full/metrics.jsonl");
  const auto split = train_losses(dir_ / "split/metrics.jsonl");
  for (int64_t step = 1; step <= 10; ++step) {
    ASSERT_TRUE(full.count(step) && split.count(step)) << "step " << step << " not logged";
    EXPECT_EQ(full.at(step), split.at(step)) << "train loss at step " << step;
  }
  expect_same_tensors(dir_ / "full/checkpoints/step_10/model.safetensors",
                      dir_ / "split/checkpoints/step_10/model.safetensors");
  // No config in the optimizer file: the bytes themselves must agree.
  EXPECT_EQ(slurp(dir_ / "full/checkpoints/step_10/optimizer.safetensors"),
            slurp(dir_ / "split/checkpoints/step_10/optimizer.safetensors"));
  EXPECT_EQ(step_dirs(dir_ / "split"), (std::vector<int64_t>{5, 10}));

  // The run's own config.yaml (the resolved config rotor wrote) starts a
  // resume with changes, and takes them: `rotor train RUN/config.yaml
  // --resume --set train.max_updates=12`.
  r = run_rotor(dir_, "train " + (dir_ / "split/config.yaml") +
                          " --resume --set train.max_updates=12 --set train.save_interval=2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(dir_ / "split/config.yaml").find("max_updates: 12"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "split/checkpoints/step_12"));
}

// (b) A run SIGKILLed mid-training resumes from its last checkpoint and
// finishes; no torn or temporary directory survives; keep_last holds;
// checkpoint_last names the newest. (c) translate reads the final and an
// averaged checkpoint.
TEST_F(TrainResume, KilledRunResumes) {
  const std::string run = dir_ / "killed";
  const std::string cmd = std::string(ROTOR_BINARY) + " train " + (dir_ / "tiny.yaml") +
                          " --set output_dir=" + run + " --set train.max_updates=1000 >" +
                          (dir_ / "killed.out") + " 2>&1";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it once it has logged update 12 (past the checkpoint of update 10).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::string metrics = slurp(run + "/metrics.jsonl");
    seen = metrics.find("\"step\": 12,") != std::string::npos ||
           metrics.find("\"step\":12,") != std::string::npos;
    int status = 0;
    if (!seen && waitpid(pid, &status, WNOHANG) == pid)
      FAIL() << "training ended early:\n" << slurp(dir_ / "killed.out");
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(seen) << "update 12 never logged:\n" << slurp(dir_ / "killed.out");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  // What a kill in the middle of a save leaves behind: a half-written
  // temporary checkpoint of another process.
  const std::vector<int64_t> before = step_dirs(run);
  ASSERT_FALSE(before.empty());
  const int64_t resumed_from = before.back(), target = resumed_from + 10;
  fs::create_directories(run + "/checkpoints/step_" + std::to_string(resumed_from + 5) +
                         ".tmp-999999");
  std::ofstream(run + "/checkpoints/step_" + std::to_string(resumed_from + 5) +
                ".tmp-999999/model.safetensors")
      << "torn";

  auto r = train("killed", "--resume --set train.max_updates=" + std::to_string(target));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(run + "/train.log").find("resumed from"), std::string::npos);
  EXPECT_EQ(step_dirs(run), (std::vector<int64_t>{target - 5, target})) << "keep_last: 2";
  for (int64_t s : step_dirs(run))
    expect_complete_checkpoint(run + "/checkpoints/step_" + std::to_string(s));
  EXPECT_EQ(fs::read_symlink(run + "/checkpoint_last"),
            fs::path("checkpoints/step_" + std::to_string(target)));
  EXPECT_EQ(leftovers(run), std::vector<std::string>{});
  // Steps logged by the killed run after its last checkpoint were redone
  // identically (train_losses checks every duplicate), and all are there.
  const auto losses = train_losses(run + "/metrics.jsonl");
  for (int64_t step = 1; step <= target; ++step) EXPECT_TRUE(losses.count(step)) << "step " << step;

  // (c) translate: one line out per line in, from the run and from an average.
  const std::string input = dir_ / "data/test.en";
  const size_t n = count_lines(slurp(input));
  ASSERT_EQ(n, 50u);
  r = run_rotor(dir_, "translate --checkpoint " + run + " --input " + input + " --output " +
                          (dir_ / "hyp.de") + " --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(slurp(dir_ / "hyp.de")), n);
  r = run_rotor(dir_, "average --last 2 --run " + run + " --output " + (dir_ / "avg"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_complete_checkpoint(dir_ / "avg", /*with_optimizer=*/false);
  r = run_rotor(dir_, "translate --checkpoint " + (dir_ / "avg") + " --input " + input +
                          " --device cpu --beam 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), n);
}

// (d) average: of a checkpoint with itself -> the same weights bitwise; of two
// -> their mean rounded once from double; --last N == the explicit list.
TEST_F(TrainResume, AverageIsExact) {
  auto r = train("run", "--set train.valid_interval=0");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string a = dir_ / "run/checkpoints/step_5", b = dir_ / "run/checkpoints/step_10";

  r = run_rotor(dir_, "average " + a + " " + a + " --output " + (dir_ / "self"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_tensors(a + "/model.safetensors", dir_ / "self/model.safetensors");
  expect_complete_checkpoint(dir_ / "self", /*with_optimizer=*/false);

  r = run_rotor(dir_, "average " + a + " " + (dir_ / "run") + " --output " + (dir_ / "two"));
  ASSERT_EQ(r.code, 0) << r.err;
  rotor::checkpoint::SafetensorsFile fa(a + "/model.safetensors"), fb(b + "/model.safetensors"),
      fm(dir_ / "two/model.safetensors");
  ASSERT_EQ(fm.names(), fa.names());
  for (const auto& name : fa.names()) {
    const auto x = fa.load(name).to_floats(), y = fb.load(name).to_floats(),
               m = fm.load(name).to_floats();
    ASSERT_EQ(m.size(), x.size());
    for (size_t i = 0; i < m.size(); ++i)
      ASSERT_EQ(m[i], static_cast<float>((static_cast<double>(x[i]) + y[i]) / 2))
          << name << "[" << i << "]";
  }
  EXPECT_EQ(slurp(dir_ / "two/config.yaml"), slurp(b + "/config.yaml"));

  r = run_rotor(dir_, "average --last 2 --run " + (dir_ / "run") + " --output " + (dir_ / "last2"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_tensors(dir_ / "two/model.safetensors", dir_ / "last2/model.safetensors");
  // Replacing an earlier average in place is fine.
  r = run_rotor(dir_, "average " + b + " --output " + (dir_ / "last2"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_tensors(b + "/model.safetensors", dir_ / "last2/model.safetensors");
  EXPECT_EQ(leftovers(dir_.path()), std::vector<std::string>{});

  // More checkpoints than the run holds is an error.
  r = run_rotor(dir_, "average --last 3 --run " + (dir_ / "run") + " --output " + (dir_ / "x"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("rotor: error: ", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

}  // namespace
