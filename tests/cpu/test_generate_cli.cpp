// `rotor generate` through the binary, on tiny causal LMs trained a few
// updates: it continues a prompt (one line out per prompt, in input order),
// the same seed gives the same output whether the prompts come from
// --prompt, a file or standard input and whatever the batch size, another
// seed another output; a position table ends a continuation with a note and
// refuses a longer prompt; bad arguments, a non-lm checkpoint and linear
// attention are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

using rotor::test::run_rotor;
using rotor::test::RunResult;
using rotor::test::TempDir;

class GenerateCli : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const TempDir& d = *dir_;
    RunResult r = run_rotor(d, rotor::test::synth_args(d / "data", {300, 10, 10, 5}));
    ASSERT_EQ(r.code, 0) << r.err;
    rotor::test::write_mlm_text(d / "data", d / "lm.txt", d / "lm_valid.txt", 10);
    auto train = [&](rotor::test::TinyConfig c, const std::string& name) {
      c.write(d / (name + ".yaml"));
      RunResult t = run_rotor(d, "train " + (d / (name + ".yaml")), "OMP_NUM_THREADS=1");
      ASSERT_EQ(t.code, 0) << name << ": " << t.err;
    };
    const std::string lm = d / "lm.txt", valid = d / "lm_valid.txt";
    train(rotor::test::tiny_lm(lm, valid, d / "rope"), "rope");
    train(rotor::test::tiny_lm(lm, valid, d / "learned")
              .set("model.position", "learned")
              .set("model.max_positions", "20"),
          "learned");
    train(rotor::test::tiny_lm(lm, valid, d / "linear")
              .set("attention.kind", "linear")
              .set("train.max_updates", "2"),
          "linear");
    train(rotor::test::tiny_mlm(lm, valid, d / "mlm"), "mlm");
    std::ofstream(d / "prompts.txt") << "two hundred\n\nninety one einundneunzig\nseven\n";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

 protected:
  static RunResult generate(const std::string& args, const std::string& stdin_text = "") {
    return run_rotor(*dir_, "generate " + args, "OMP_NUM_THREADS=1", stdin_text);
  }
  static std::string path(const std::string& name) { return *dir_ / name; }
  static TempDir* dir_;
};

TempDir* GenerateCli::dir_ = nullptr;

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST_F(GenerateCli, ContinuesAPromptTheSameForTheSameSeed) {
  const std::string base = "--checkpoint " + path("rope") + " --max-new-tokens 12 ";
  RunResult a = generate(base + "--prompt 'two hundred' --seed 3");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.err, "");
  EXPECT_EQ(lines(a.out), 1u) << a.out;
  EXPECT_GT(a.out.size(), 1u) << "no continuation";
  RunResult again = generate(base + "--prompt 'two hundred' --seed 3");
  EXPECT_EQ(again.out, a.out);
  RunResult best = generate("--checkpoint " + path("rope") +
                            ":best --max-new-tokens 12 --prompt 'two hundred' --seed 3");
  ASSERT_EQ(best.code, 0) << best.err;
  EXPECT_EQ(lines(best.out), 1u);
  RunResult other = generate(base + "--prompt 'two hundred' --seed 4");
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_NE(other.out, a.out);
  RunResult greedy = generate(base + "--prompt 'two hundred' --greedy");
  RunResult greedy2 = generate(base + "--prompt 'two hundred' --greedy --seed 9");
  ASSERT_EQ(greedy.code, 0) << greedy.err;
  EXPECT_EQ(greedy.out, greedy2.out);  // the argmax draws nothing
  RunResult nucleus = generate(base +
                               "--prompt 'two hundred' --top-k 5 --top-p 0.9 "
                               "--temperature 0.7");
  ASSERT_EQ(nucleus.code, 0) << nucleus.err;
  EXPECT_EQ(lines(nucleus.out), 1u);
}

// One line out per line in, in order; a file, standard input and any batch
// size give the same lines (each line's draws follow its line number).
TEST_F(GenerateCli, FileAndStdinInBatches) {
  const std::string base = "--checkpoint " + path("rope") + " --max-new-tokens 10 --seed 7 ";
  RunResult file = generate(base + "--input " + path("prompts.txt"));
  ASSERT_EQ(file.code, 0) << file.err;
  EXPECT_EQ(lines(file.out), 4u) << file.out;
  RunResult one = generate(base + "--input " + path("prompts.txt") + " --batch-size 1");
  EXPECT_EQ(one.out, file.out);
  RunResult in = generate(base + "--input -", rotor::test::slurp(path("prompts.txt")));
  ASSERT_EQ(in.code, 0) << in.err;
  EXPECT_EQ(in.out, file.out);
  RunResult piped = generate(base, rotor::test::slurp(path("prompts.txt")));
  EXPECT_EQ(piped.out, file.out);
  // Line 1 alone (--prompt) is line 1 of its input too: the same draws.
  std::string first_line = file.out.substr(0, file.out.find('\n') + 1);
  RunResult first = generate(base + "--prompt 'two hundred'");
  EXPECT_EQ(first.out, first_line);
}

TEST_F(GenerateCli, PositionTableEndsAndBoundsPrompts) {
  const std::string base = "--checkpoint " + path("learned") + " --greedy ";
  RunResult r = generate(base + "--prompt 'two hundred' --max-new-tokens 100");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines(r.out), 1u);
  // After 4 updates the argmax repeats a token and never ends the text: the
  // table's end does, with a note.
  EXPECT_NE(r.err.find("rotor: generate: --prompt: stopped at model.max_positions = 20 (learned "
                       "positions) after "),
            std::string::npos)
      << r.err;
  std::string long_prompt;
  for (int i = 0; i < 30; ++i) long_prompt += "seven ";
  RunResult too_long = generate(base + "--prompt '" + long_prompt + "'");
  EXPECT_EQ(too_long.code, 1);
  EXPECT_NE(too_long.err.find("rotor: error: generate: --prompt: the prompt has "),
            std::string::npos)
      << too_long.err;
  EXPECT_NE(too_long.err.find("more than model.max_positions = 20"), std::string::npos);
  EXPECT_EQ(too_long.out, "");
}

struct BadCase {
  std::string args, message;
};

TEST_F(GenerateCli, BadArgumentsAndCheckpointsAreOneLineErrors) {
  const std::string rope = "--checkpoint " + path("rope") + " ";
  const std::vector<BadCase> cases = {
      {rope + "--prompt a --temperature 0", "--temperature must be a number above 0"},
      {rope + "--prompt a --temperature -1", "--temperature must be a number above 0"},
      {rope + "--prompt a --top-p 0", "--top-p must be a number above 0 and at most 1, got 0"},
      {rope + "--prompt a --top-p 1.5", "--top-p must be a number above 0 and at most 1"},
      {rope + "--prompt a --top-k -1", "--top-k must be an integer from 0"},
      {rope + "--prompt a --max-new-tokens 0", "--max-new-tokens must be an integer from 1"},
      {rope + "--prompt a --batch-size 0", "--batch-size must be an integer from 1"},
      {rope + "--prompt a --greedy --temperature 0.5",
       "--greedy takes the most likely token; it cannot be combined with --temperature"},
      {rope + "--prompt a --input " + path("prompts.txt"), "--prompt and --input both given"},
      {rope + "--input " + path("absent.txt"), "--input " + path("absent.txt")},
      {"--checkpoint " + path("absent") + " --prompt a", "no such checkpoint or run directory"},
      {"--checkpoint " + path("mlm") + " --prompt a",
       "is a task-mlm checkpoint; generate runs task-lm models"},
      {"--checkpoint " + path("linear") + " --prompt a",
       "has attention.kind linear, which has no incremental decoding"},
  };
  for (const BadCase& c : cases) {
    RunResult r = generate(c.args);
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("rotor: error: ", 0), 0u) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

}  // namespace
