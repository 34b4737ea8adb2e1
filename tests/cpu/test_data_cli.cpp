// The data subcommands end to end through the rotor binary: a good run, and
// bad input that must exit non-zero with one line "rotor: error: ...".
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/test_util.h"

namespace {

using rotor::test::TempDir;

struct RunResult {
  int code;
  std::string err;
};

RunResult run_rotor(const TempDir& dir, const std::string& args) {
  const std::string err = dir / "stderr.txt";
  std::string cmd =
      std::string(ROTOR_BINARY) + " " + args + " >" + (dir / "stdout.txt") + " 2>" + err;
  int status = std::system(cmd.c_str());
  std::ifstream f(err);
  std::stringstream ss;
  ss << f.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ss.str()};
}

void expect_one_line_error(const RunResult& r, const std::string& needle) {
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_LT(r.code, 128) << "killed by a signal: " << r.err;
  EXPECT_EQ(r.err.rfind("rotor: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(data_cli, SynthSpmTrainPrepare) {
  TempDir dir;
  auto r = run_rotor(dir, "synth numbers-en-de --output " + (dir / "num") +
                              " --train 2000 --valid 50 --test 50 --test-long 20 --seed 3");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f : {"train.en", "train.de", "valid.en", "test.de", "test_long.en"})
    EXPECT_TRUE(std::filesystem::exists(dir / ("num/" + std::string(f)))) << f;
  r = run_rotor(dir, "spm-train --input " + (dir / "num/train.en") + " --input " +
                         (dir / "num/train.de") + " --model-prefix " + (dir / "spm") +
                         " --vocab-size 300 --user-defined-symbols \"[MASK],[CLS]\" --threads 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << "SentencePiece's log is silenced: " << r.err;
  r = run_rotor(dir, "prepare --spm " + (dir / "spm.model") + " --src " + (dir / "num/train.en") +
                         " --tgt " + (dir / "num/train.de") + " --output-prefix " +
                         (dir / "train") + " --threads 2 --max-len-ratio 0");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* f : {"train.src.bin", "train.src.idx", "train.tgt.bin", "train.tgt.idx"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  // Run again, each writer replaces its own earlier output.
  r = run_rotor(dir, "synth numbers-en-de --output " + (dir / "num") +
                         " --train 2000 --valid 50 --test 50 --test-long 20 --seed 4");
  EXPECT_EQ(r.code, 0) << r.err;
  r = run_rotor(dir, "prepare --spm " + (dir / "spm.model") + " --src " + (dir / "num/train.en") +
                         " --tgt " + (dir / "num/train.de") + " --output-prefix " +
                         (dir / "train") + " --threads 2 --max-len-ratio 0");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(data_cli, BadInputIsOneLineError) {
  TempDir dir;
  expect_one_line_error(run_rotor(dir, "spm-train --input " + (dir / "nope.txt") +
                                           " --model-prefix " + (dir / "m") + " --vocab-size 100"),
                        "nope.txt");
  std::ofstream(dir / "a.en") << "one\ntwo\n";
  std::ofstream(dir / "a.de") << "eins\n";
  std::ofstream(dir / "fake.model") << "not a model";
  expect_one_line_error(
      run_rotor(dir, "prepare --spm " + (dir / "fake.model") + " --src " + (dir / "a.en") +
                         " --tgt " + (dir / "a.de") + " --output-prefix " + (dir / "out")),
      "fake.model");
  expect_one_line_error(
      run_rotor(dir, "prepare --spm " + (dir / "none.model") + " --src " + (dir / "missing.en") +
                         " --output-prefix " + (dir / "out")),
      "missing.en");
  expect_one_line_error(run_rotor(dir, "synth roman-numerals --output " + (dir / "x")),
                        "roman-numerals");
  expect_one_line_error(
      run_rotor(dir, "synth numbers-en-de --output " + (dir / "x") + " --train 0"), "train");
}

}  // namespace
