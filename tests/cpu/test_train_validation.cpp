// What a training run watches and keeps, through the rotor binary: validation
// BLEU and chrF from beam search, checkpoints/best following
// train.best_metric, early stopping, a resume that keeps the best and the
// patience count, the test set scored at the end, max_epochs, non-finite
// updates, and the rules of a run directory (lock, --resume, --overwrite).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/json_io.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::json_io::Json;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

class TrainValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = run(rotor::test::synth_args(dir_ / "data", {400, 40, 30, 10, 3}));
    ASSERT_EQ(r.code, 0) << r.err;
    // 40 updates, validated by BLEU every 10 and the best kept.
    rotor::test::tiny_translation(dir_ / "data", "unused")
        .set("seed", "11")
        .set("model.dropout", "0.0")
        .set("train.max_updates", "40")
        .set("train.log_interval", "10")
        .set("train.valid_interval", "10")
        .set("train.save_interval", "20")
        .set("train.keep_last", "2")
        .set("train.valid_metrics", "[loss, bleu, chrf]")
        .set("train.best_metric", "bleu")
        .set("optim.lr", "3.0e-3")
        .set("optim.warmup_updates", "5")
        .set("decode.beam", "2")
        .set("decode.max_len_a", "1.2")
        .set("decode.max_len_b", "4")
        .write(dir_ / "tiny.yaml");
  }
  RunResult run(const std::string& args, const std::string& env = "OMP_NUM_THREADS=1") {
    return rotor::test::run_rotor(dir_, args, env);
  }
  RunResult train(const std::string& out, const std::string& extra = "",
                  const std::string& env = "OMP_NUM_THREADS=1") {
    return run("train " + (dir_ / "tiny.yaml") + " --set output_dir=" + (dir_ / out) + " " + extra,
               env);
  }
  // The records of one split of a run's metrics.jsonl.
  std::vector<Json> records(const std::string& out, const std::string& split) {
    std::vector<Json> found;
    std::istringstream in(slurp(dir_ / out + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      if (j.at("split").get<std::string>() == split) found.push_back(j);
    }
    return found;
  }
  TempDir dir_;
};

TEST_F(TrainValidation, ScoresTranslationsAndKeepsTheBestByBleu) {
  auto r = train("run");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto valid = records("run", "valid");
  ASSERT_EQ(valid.size(), 4u);  // updates 10, 20, 30, 40
  double best = -1;
  int64_t best_step = 0;
  for (const auto& v : valid) {
    for (const char* k : {"loss", "bleu", "chrf", "decoded", "decode_seconds"})
      ASSERT_TRUE(v.contains(k)) << k << " missing in " << v.dump();
    EXPECT_EQ(v.at("decoded").get<int64_t>(), 40);
    const double bleu = v.at("bleu").get<double>();
    EXPECT_GE(bleu, 0.0);
    EXPECT_LE(bleu, 100.0);
    if (bleu > best) best = bleu, best_step = v.at("step").get<int64_t>();
  }
  EXPECT_GT(valid.back().at("chrf").get<double>(), valid.front().at("chrf").get<double>())
      << "the model learns: chrF rises";
  // checkpoints/best is the validation with the highest BLEU (the first of equals).
  const Json state = rotor::json_io::load(dir_ / "run/checkpoints/best/trainer_state.json");
  EXPECT_EQ(state.at("best_metric").get<std::string>(), "bleu");
  EXPECT_EQ(state.at("best_step").get<int64_t>(), best_step);
  EXPECT_DOUBLE_EQ(state.at("best_score").get<double>(), best);
  EXPECT_FALSE(fs::exists(dir_ / "run/checkpoints/best/optimizer.safetensors"));
  // Never pruned by keep_last, and readable by name.
  std::ofstream(dir_ / "in.txt") << "three hundred twelve\n";
  r = run("translate --checkpoint " + (dir_ / "run") + ":best --input " + (dir_ / "in.txt"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out, "");
  EXPECT_NE(slurp(dir_ / "run/train.log").find("valid at update 40 | loss"), std::string::npos);
}

// TensorBoard holds what metrics.jsonl holds: every number of every record as
// the scalar "<split>/<field>" at the record's step (read back with the
// tensorboard package, as `tensorboard --logdir` would), also after a resume.
TEST_F(TrainValidation, TensorBoardMatchesMetrics) {
  const std::string python = ROTOR_TENSORBOARD_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no python3 with the tensorboard package";
  const std::string quick =
      "--set train.max_updates=12 --set train.log_interval=2 "
      "--set train.valid_interval=4 --set train.save_interval=6 ";
  ASSERT_EQ(train("run", quick + "--set train.max_updates=6").code, 0);
  auto r = train("run", quick + "--resume");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string out = dir_ / "scalars.txt";
  const std::string cmd = python + " " + ROTOR_SOURCE_DIR + "/tests/scripts/read_tensorboard.py " +
                          (dir_ / "run/tensorboard") + " >" + out + " 2>" + (dir_ / "tb.err");
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(WEXITSTATUS(rc), 0) << slurp(dir_ / "tb.err");
  // tag -> step -> value, as TensorBoard keeps them (the resumed steps once).
  std::map<std::string, std::map<int64_t, float>> tb;
  std::istringstream lines(slurp(out));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string tag, step, value;
    std::getline(f, tag, '\t');
    std::getline(f, step, '\t');
    std::getline(f, value);
    EXPECT_TRUE(tb[tag].emplace(std::stoll(step), std::strtof(value.c_str(), nullptr)).second)
        << tag << " at step " << step << " twice";
  }
  size_t compared = 0;
  for (const char* split : {"train", "valid"})
    for (const auto& rec : records("run", split))
      for (const auto& [key, value] : rec.items()) {
        if (key == "step" || key == "split" || !value.is_number()) continue;
        const std::string tag = std::string(split) + "/" + key;
        const int64_t step = rec.at("step").get<int64_t>();
        ASSERT_TRUE(tb[tag].count(step)) << tag << " at step " << step << " missing";
        EXPECT_EQ(tb[tag][step], static_cast<float>(value.get<double>())) << tag << " " << step;
        ++compared;
      }
  EXPECT_GT(compared, 40u);
  EXPECT_EQ(tb["train/loss"].size(), 6u) << "steps 2..12, those after the checkpoint once";
  EXPECT_EQ(tb["valid/bleu"].size(), 4u)
      << "validations at 4, 6 (the first run's last update), 8, 12";
}

TEST_F(TrainValidation, PatienceStopsARunThatNoLongerImproves) {
  // A learning rate too small to move a weight: every validation scores the same.
  auto r = train("run",
                 "--set optim.lr=1e-12 --set optim.warmup_updates=0 --set optim.warmup_init_lr=0 "
                 "--set train.valid_interval=2 --set train.patience=2 "
                 "--set train.valid_metrics=[loss] --set train.best_metric=loss");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto valid = records("run", "valid");
  ASSERT_EQ(valid.size(), 3u) << "validations at 2 (the best), 4 and 6 (no better): stop";
  EXPECT_EQ(valid.back().at("step").get<int64_t>(), 6);
  const std::string log = slurp(dir_ / "run/train.log");
  EXPECT_NE(log.find("early stopping: loss did not improve"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(dir_ / "run/checkpoints/step_6/model.safetensors"))
      << "a run that stops early saves where it stopped";
}

TEST_F(TrainValidation, ResumeKeepsTheBestAndThePatienceCount) {
  const std::string args =
      "--set optim.lr=1e-12 --set optim.warmup_updates=0 --set optim.warmup_init_lr=0 --set "
      "train.valid_interval=2 "
      "--set train.patience=3 --set train.save_interval=4 "
      "--set train.valid_metrics=[loss] --set train.best_metric=loss";
  ASSERT_EQ(train("whole", args).code, 0);
  ASSERT_EQ(train("split", args + " --set train.max_updates=4").code, 0);
  const Json mid = rotor::json_io::load(dir_ / "split/checkpoints/step_4/trainer_state.json");
  EXPECT_EQ(mid.at("bad_validations").get<int64_t>(), 1);
  EXPECT_TRUE(mid.at("has_best").get<bool>());
  auto r = train("split", args + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  // Both stop at update 8 (best at 2, then 4, 6, 8 without improvement).
  EXPECT_EQ(records("whole", "valid").back().at("step").get<int64_t>(), 8);
  EXPECT_EQ(records("split", "valid").back().at("step").get<int64_t>(), 8);
  EXPECT_EQ(records("split", "valid").size(), 4u) << "no validation twice after the resume";
  const Json whole = rotor::json_io::load(dir_ / "whole/checkpoints/step_8/trainer_state.json");
  const Json split = rotor::json_io::load(dir_ / "split/checkpoints/step_8/trainer_state.json");
  for (const char* key : {"step", "micro_step", "epoch", "batch_index", "has_best", "best_metric",
                          "best_score", "best_step", "bad_validations"})
    EXPECT_EQ(whole.at(key), split.at(key)) << key;
}

TEST_F(TrainValidation, TestSetIsScoredAtTheEndByTheBestModel) {
  auto r = train("run", "--set data.test=" + (dir_ / "data/test") + " --set train.max_updates=20");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto test = records("run", "test");
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0].at("decoded").get<int64_t>(), 30);
  EXPECT_TRUE(test[0].contains("bleu"));
  EXPECT_NE(slurp(dir_ / "run/train.log").find("test: the best model"), std::string::npos);
}

TEST_F(TrainValidation, MaxEpochsStopsAndSaves) {
  auto r = train(
      "run",
      "--set train.max_epochs=1 --set train.max_updates=100000 "
      "--set train.save_interval=0 --set train.valid_metrics=[loss] --set train.best_metric=loss");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = slurp(dir_ / "run/train.log");
  EXPECT_NE(log.find("train.max_epochs reached"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_symlink(dir_ / "run/checkpoint_last"));
}

TEST_F(TrainValidation, NonFiniteUpdatesStopTheRunWithoutSaving) {
  auto r = train("run", "--set train.max_nonfinite=1 --set train.save_interval=1",
                 "OMP_NUM_THREADS=1 ROTOR_TEST_NAN_GRAD_AT=3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("non-finite gradients (train.max_nonfinite)"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "run/checkpoints/step_2"));
  EXPECT_FALSE(fs::exists(dir_ / "run/checkpoints/step_3")) << "the failed update is not saved";
}

// ---- run directories --------------------------------------------------------

std::string one_line(const std::string& err) {
  return err.substr(0, err.find('\n'));
}

TEST_F(TrainValidation, ARunDirectoryIsContinuedOnlyWhenAsked) {
  const std::string quick =
      "--set train.max_updates=4 --set train.valid_metrics=[loss] --set train.best_metric=loss "
      "--set train.save_interval=2";
  ASSERT_EQ(train("run", quick).code, 0);
  const std::string before = slurp(dir_ / "run/metrics.jsonl");
  auto r = train("run", quick);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(one_line(r.err).find("holds an earlier run (2 checkpoint(s), the newest at update 4)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_EQ(slurp(dir_ / "run/metrics.jsonl"), before) << "the refused run changed nothing";
  r = train("run", quick + " --overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<fs::path> moved;
  for (const auto& e : fs::directory_iterator(dir_ / "run"))
    if (e.path().filename().string().rfind("previous-", 0) == 0) moved.push_back(e.path());
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(slurp((moved[0] / "metrics.jsonl").string()), before) << "--overwrite moves, keeps";
  EXPECT_TRUE(fs::exists(moved[0] / "checkpoints/step_4/model.safetensors"));
  EXPECT_NE(slurp(dir_ / "run/train.log").find("--overwrite: the earlier run"), std::string::npos);
  r = train("run", quick + " --resume --overwrite");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
}

// What a killed run left half-written (its process gone) is removed when the
// next run starts; a live writer's temporary is not touched.
TEST_F(TrainValidation, TheTemporariesOfADeadRunAreRemoved) {
  const std::string quick =
      "--set train.max_updates=2 --set train.valid_metrics=[loss] "
      "--set train.best_metric=loss";
  ASSERT_EQ(train("run", quick).code, 0);
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string tag = ".tmp-" + std::to_string(dead);
  const std::vector<std::string> stale = {
      dir_ / ("run/config.yaml" + tag), dir_ / ("run/spm" + tag + ".model"),
      dir_ / ("run/data/train.src.bin" + tag), dir_ / ("run/checkpoints/step_9" + tag)};
  for (const auto& f : stale) {
    if (f.find("step_9") != std::string::npos) {
      fs::create_directories(f);
    } else {
      std::ofstream(f) << "half";
    }
  }
  const std::string alive = dir_ / ("run/data/valid.src.bin.tmp-" + std::to_string(getpid()));
  std::ofstream(alive) << "being written";
  auto r = train("run", quick + " --resume --set train.max_updates=3");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& f : stale) EXPECT_FALSE(fs::exists(f)) << f;
  EXPECT_TRUE(fs::exists(alive)) << "a live process's file";
}

TEST_F(TrainValidation, TwoRunsCannotShareADirectory) {
  // The first run holds the lock while it trains (a long run, stopped below).
  const std::string out = dir_ / "run";
  const std::string cmd = std::string(ROTOR_BINARY) + " train " + (dir_ / "tiny.yaml") +
                          " --set output_dir=" + out +
                          " --set train.max_updates=100000 --set train.valid_interval=0 "
                          ">/dev/null 2>&1";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec env OMP_NUM_THREADS=1 " + cmd).c_str(), nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(out + "/train.log") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto r = train("run", "--resume");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("is in use by rotor pid " + std::to_string(pid)), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("two runs cannot share an output directory"), std::string::npos) << r.err;
  // The lock dies with its holder: the directory is usable again at once.
  r = train("run", "--resume --set train.max_updates=2 --set train.valid_interval=0");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(TrainValidation, TheConfigFileIsNeverReplaced) {
  fs::create_directory(dir_ / "here");
  const std::string own = slurp(dir_ / "tiny.yaml") + "\n# my notes\n";
  std::ofstream(dir_ / "here/config.yaml") << own;
  auto r = run("train " + (dir_ / "here/config.yaml") + " --set output_dir=" + (dir_ / "here"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("would replace the config file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir_ / "here/config.yaml"), own);
}

}  // namespace
