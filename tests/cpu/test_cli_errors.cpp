// User errors through the rotor binary (docs/design.md, "Config" and "Errors"): a bad
// config, a missing file, a corrupt checkpoint each print one line
// "rotor: error: ..." that says what and where, exit with 1 (not a signal),
// and destroy nothing; --dump-config prints YAML that loads back.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

namespace {

namespace fs = std::filesystem;
using rotor::test::TempDir;

using rotor::test::RunResult;
using rotor::test::slurp;

RunResult rotor_run(const TempDir& dir, const std::string& args,
                    const std::string& stdin_text = "") {
  return rotor::test::run_rotor(dir, args, "", stdin_text);
}
// Exit code 1, and stderr is exactly one line "rotor: error: ..." containing
// every needle.
void expect_one_line_error(const RunResult& r, std::initializer_list<std::string> needles) {
  EXPECT_EQ(r.code, 1) << (r.code >= 128 ? "killed by a signal: " : "") << r.err;
  EXPECT_EQ(r.err.rfind("rotor: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const auto& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << "no '" << n << "' in: " << r.err;
}

class CliErrors : public ::testing::Test {
 protected:
  // A config whose data.train is DATA (not synthesized unless asked).
  std::string write_config(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  static rotor::test::TinyConfig tiny(const std::string& data, const std::string& run) {
    return rotor::test::tiny_translation_2_updates(data, run);
  }
  std::string good_config() { return tiny(dir_ / "data", dir_ / "run").write(dir_ / "good.yaml"); }
  // Synthesizes data and trains 2 updates: DIR/run/checkpoints/step_2.
  void train_tiny() {
    auto r = rotor_run(dir_, rotor::test::synth_args(dir_ / "data"));
    ASSERT_EQ(r.code, 0) << r.err;
    r = rotor_run(dir_, "train " + good_config());
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(fs::exists(dir_ / "run/checkpoints/step_2/model.safetensors"));
  }
  TempDir dir_;
};

TEST_F(CliErrors, ConfigErrorsNameKeyAndLine) {
  const std::string good = good_config();
  expect_one_line_error(rotor_run(dir_, "train " + (dir_ / "missing.yaml")), {"missing.yaml"});

  const auto cfg = tiny(dir_ / "data", dir_ / "run");
  const std::string at_d_ff = ":" + std::to_string(cfg.line_of("model.d_ff")) + ":";
  std::string text = slurp(good);
  text.replace(text.find("  d_ff: 64"), 9, "  d_fff: 64");
  expect_one_line_error(rotor_run(dir_, "train " + write_config("unknown.yaml", text)),
                        {"unknown.yaml" + at_d_ff, "model.d_fff", "model.d_ff"});

  text = slurp(good);
  text.replace(text.find("max_updates: 2"), 14, "max_updates: lots");
  expect_one_line_error(rotor_run(dir_, "train " + write_config("type.yaml", text)),
                        {"type.yaml:" + std::to_string(cfg.line_of("train.max_updates")) + ":",
                         "train.max_updates", "lots"});

  text = slurp(good);
  text.replace(text.find("position: rope"), 14, "position: rotary");
  expect_one_line_error(rotor_run(dir_, "train " + write_config("enum.yaml", text)),
                        {"enum.yaml:" + std::to_string(cfg.line_of("model.position")) + ":",
                         "model.position", "rotary"});

  expect_one_line_error(rotor_run(dir_, "train " + good + " --set model.d_modle=64"),
                        {"--set model.d_modle=64", "model.d_modle"});
  expect_one_line_error(rotor_run(dir_, "train " + good + " --set train.max_updates=-3"),
                        {"train.max_updates"});
  write_config("notyaml.yaml", "model: [unclosed\n");
  expect_one_line_error(rotor_run(dir_, "train " + (dir_ / "notyaml.yaml")), {"notyaml.yaml"});
  // None of these created the run directory.
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST_F(CliErrors, MissingDataFile) {
  expect_one_line_error(rotor_run(dir_, "train " + good_config()),
                        {"data.train", dir_ / "data/train"});
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "a run that cannot start writes nothing";
  auto r = rotor_run(dir_, "synth numbers-en-de --output " + (dir_ / "data") + " --train 50");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_one_line_error(
      rotor_run(dir_, "train " + good_config() + " --set data.valid=" + (dir_ / "nowhere/valid")),
      {"data.valid", dir_ / "nowhere/valid"});
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST_F(CliErrors, DumpConfigLoadsBack) {
  const std::string good = good_config();
  const std::vector<std::string> sets = {"train.max_updates=7", "optim.betas=[0.9,0.999]",
                                         "model.activation=gelu"};
  std::string args = "train " + good + " --dump-config";
  for (const auto& s : sets) args += " --set " + s;
  auto r = rotor_run(dir_, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const std::string dumped = write_config("dumped.yaml", r.out);
  rotor::Config back = rotor::load_config(dumped);
  EXPECT_EQ(back, rotor::load_config(good, sets));
  EXPECT_EQ(back.train.max_updates, 7);
  EXPECT_EQ(back.optim.betas[1], 0.999);
  // A fixed point: dumping the dump gives the same text.
  r = rotor_run(dir_, "train " + dumped + " --dump-config");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, slurp(dumped));
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST_F(CliErrors, BadCheckpoints) {
  ASSERT_NO_FATAL_FAILURE(train_tiny());
  const std::string ckpt = dir_ / "run/checkpoints/step_2";

  expect_one_line_error(rotor_run(dir_, "translate --checkpoint " + (dir_ / "nothing"), "one\n"),
                        {dir_ / "nothing"});

  // Truncated weights, at several lengths: one line, exit 1, no crash.
  const std::string bytes = slurp(ckpt + "/model.safetensors");
  for (size_t len : {size_t{0}, size_t{5}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    fs::remove_all(dir_ / "corrupt");
    fs::copy(ckpt, dir_ / "corrupt");
    std::ofstream(dir_ / "corrupt/model.safetensors", std::ios::binary | std::ios::trunc)
        << bytes.substr(0, len);
    SCOPED_TRACE("truncated to " + std::to_string(len) + " bytes");
    expect_one_line_error(rotor_run(dir_,
                                    "translate --device cpu --checkpoint " + (dir_ / "corrupt") +
                                        " --output " + (dir_ / "hyp.txt"),
                                    "one\ntwo\n"),
                          {"model.safetensors"});
    EXPECT_FALSE(fs::exists(dir_ / "hyp.txt"));
  }

  // Weights of another model than config.yaml describes.
  fs::remove_all(dir_ / "corrupt");
  fs::copy(ckpt, dir_ / "corrupt");
  {
    std::string cfg = slurp(ckpt + "/config.yaml");
    const size_t p = cfg.find("d_ff: 64");
    ASSERT_NE(p, std::string::npos) << cfg;
    cfg.replace(p, 8, "d_ff: 48");
    std::ofstream(dir_ / "corrupt/config.yaml", std::ios::trunc) << cfg;
  }
  expect_one_line_error(
      rotor_run(dir_, "translate --device cpu --checkpoint " + (dir_ / "corrupt"), "one\n"),
      {"model.safetensors", "shape"});

  // average: mismatched shapes (and a missing tensor) name the file and the tensor.
  fs::remove_all(dir_ / "other");
  fs::copy(ckpt, dir_ / "other");
  rotor::checkpoint::NamedTensors tensors =
      rotor::checkpoint::load_safetensors(ckpt + "/model.safetensors");
  ASSERT_GE(tensors.size(), 2u);
  const std::string first = tensors[0].first;
  tensors[0].second = rotor::Tensor::zeros({3, 5});
  rotor::checkpoint::save_safetensors(dir_ / "other/model.safetensors", tensors);
  expect_one_line_error(
      rotor_run(dir_, "average " + ckpt + " " + (dir_ / "other") + " --output " + (dir_ / "avg")),
      {"other/model.safetensors", first, "[3, 5]"});
  EXPECT_FALSE(fs::exists(dir_ / "avg"));
  tensors = rotor::checkpoint::load_safetensors(ckpt + "/model.safetensors");
  const std::string missing = tensors.back().first;
  tensors.pop_back();
  rotor::checkpoint::save_safetensors(dir_ / "other/model.safetensors", tensors);
  expect_one_line_error(
      rotor_run(dir_, "average " + ckpt + " " + (dir_ / "other") + " --output " + (dir_ / "avg")),
      {"other/model.safetensors", missing});
  expect_one_line_error(
      rotor_run(dir_, "average " + ckpt + " " + (dir_ / "nothing") + " --output " + (dir_ / "avg")),
      {dir_ / "nothing"});
  // An --output that is not a checkpoint is never replaced.
  fs::create_directories(dir_ / "precious");
  std::ofstream(dir_ / "precious/notes.txt") << "keep me";
  expect_one_line_error(rotor_run(dir_, "average " + ckpt + " --output " + (dir_ / "precious")),
                        {"precious"});
  EXPECT_EQ(slurp(dir_ / "precious/notes.txt"), "keep me");
  EXPECT_FALSE(fs::exists(dir_ / "avg"));

  // --resume from a corrupt checkpoint stops with the error (after the run's
  // log lines) and leaves the checkpoint as it was.
  const std::string state = slurp(ckpt + "/trainer_state.json");
  std::ofstream(ckpt + "/trainer_state.json", std::ios::trunc) << state.substr(0, state.size() / 2);
  auto r = rotor_run(dir_, "train " + good_config() + " --resume --set train.max_updates=4");
  EXPECT_EQ(r.code, 1) << r.err;
  const size_t last_line = r.err.rfind('\n', r.err.size() - 2);
  const std::string tail = r.err.substr(last_line == std::string::npos ? 0 : last_line + 1);
  EXPECT_EQ(tail.rfind("rotor: error: ", 0), 0u) << r.err;
  EXPECT_NE(tail.find("trainer_state.json"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(ckpt + "/trainer_state.json"), state.substr(0, state.size() / 2));
  EXPECT_FALSE(fs::exists(dir_ / "run/checkpoints/step_4"));
}

}  // namespace
