// chrF against figures printed by sacreBLEU 2.6.0 (pip install sacrebleu;
// Python 3.11), plus hand-computed edge cases.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "eval/chrf.h"
#include "eval/text_io.h"
#include "support/test_util.h"

namespace rotor::eval {
namespace {

const std::vector<std::string> kReadmeHyps = {"The dog bit the man.", "It wasn't surprising.",
                                              "The man had just bitten him."};
const std::vector<std::vector<std::string>> kReadmeRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

TEST(Chrf, SacrebleuReadmeExample) {
  const ChrfOptions opts;
  const ChrfResult r = corpus_chrf(kReadmeHyps, kReadmeRefs, opts);
  EXPECT_NEAR(r.score, 59.72751782684763, 1e-9);
  EXPECT_EQ(format_chrf(r, opts), "chrF2 = 59.73");
  EXPECT_EQ(
      chrf_signature(opts, 2),
      std::string("nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:rotor-") + ROTOR_VERSION);
  ChrfOptions pp;
  pp.word_order = 2;
  const ChrfResult p = corpus_chrf(kReadmeHyps, kReadmeRefs, pp);
  EXPECT_NEAR(p.score, 59.15310444399262, 1e-9);
  EXPECT_EQ(format_chrf(p, pp), "chrF2++ = 59.15");
}

TEST(Chrf, HandComputed) {
  // "abc" vs "abd": orders 1..3 have precision = recall = 2/3, 1/2, 0; orders
  // 4..6 have no n-grams and are left out of the averages: F = (2/3+1/2+0)/3.
  const ChrfResult r = corpus_chrf({"abc"}, {{"abd"}});
  EXPECT_NEAR(r.score, 100.0 * 7.0 / 18.0, 1e-12);
  EXPECT_EQ(r.stats[0], 3);
  EXPECT_EQ(r.stats[2], 2);
  // Precision and recall are averaged before the F-score: hypothesis "ab",
  // reference "abcd". Order 1: P = 1, R = 1/2; order 2: P = 1, R = 1/3.
  const double p = 1.0, rc = (0.5 + 1.0 / 3.0) / 2;
  EXPECT_NEAR(corpus_chrf({"ab"}, {{"abcd"}}).score, 100.0 * 5 * p * rc / (4 * p + rc), 1e-12);
}

TEST(Chrf, EdgeCases) {
  EXPECT_DOUBLE_EQ(corpus_chrf({"Ein Test.", "zwei"}, {{"Ein Test.", "zwei"}}).score, 100.0);
  EXPECT_EQ(corpus_chrf({"xyz"}, {{"abc"}}).score, 0.0);
  EXPECT_EQ(corpus_chrf({"", ""}, {{"abc", "d"}}).score, 0.0);
  // Whitespace does not count: "a b c" is "abc".
  EXPECT_DOUBLE_EQ(corpus_chrf({"a b\tc"}, {{"abc"}}).score, 100.0);
  // An order the reference is too short for adds no hypothesis n-grams.
  const ChrfResult r = corpus_chrf({"abcd"}, {{"ab"}});
  EXPECT_EQ(r.stats[3 * 2], 0);      // order 3: hypothesis count dropped
  EXPECT_EQ(r.stats[3 * 2 + 1], 0);  // the reference has no trigram
  ChrfOptions lc;
  lc.lowercase = true;
  EXPECT_DOUBLE_EQ(corpus_chrf({"GROSS ÄRGER"}, {{"gross ärger"}}, lc).score, 100.0);
  EXPECT_THROW(corpus_chrf({"a"}, {{"a", "b"}}), Error);
}

std::vector<std::string> perturbed(const std::vector<std::string>& lines) {
  // Same perturbation as test_eval_bleu.cpp: drop word j of line i when
  // (i + 2j) % 7 == 3, swap neighbours k, k+1 when (i + k) % 5 == 0.
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> kept;
    std::istringstream words(lines[i]);
    std::string w;
    for (size_t j = 0; std::getline(words, w, ' ');) {
      if (w.empty()) continue;
      if ((i + 2 * j) % 7 != 3) kept.push_back(w);
      ++j;
    }
    for (size_t k = 0; k + 1 < kept.size(); ++k)
      if ((i + k) % 5 == 0) std::swap(kept[k], kept[k + 1]);
    std::string line;
    for (const auto& k : kept) line += (line.empty() ? "" : " ") + k;
    out.push_back(line);
  }
  return out;
}

TEST(Chrf, RealDataMatchesSacrebleu) {
  ROTOR_REQUIRE_SHARED_DATA("newstest2014/newstest2014.de");
  const std::string dir = test::shared_data_dir() + "/newstest2014/";
  const auto de = read_lines(dir + "newstest2014.de");
  const auto hyp = perturbed(de);
  // Figures printed by sacreBLEU 2.6.0 for the same perturbation.
  EXPECT_NEAR(corpus_chrf(hyp, {de}).score, 68.82259108331137, 1e-9);
  ChrfOptions pp;
  pp.word_order = 2;
  EXPECT_NEAR(corpus_chrf(hyp, {de}, pp).score, 67.5068137788405, 1e-9);
  EXPECT_NEAR(corpus_chrf(read_lines(dir + "newstest2014.en"), {de}).score, 23.228235359603833,
              1e-9);
}

struct CommandResult {
  int exit_code;
  std::string output;
};

CommandResult run_command(const std::string& args) {
  const std::string cmd = std::string(ROTOR_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ChrfCommand, ScoresAndRejectsLineCountMismatch) {
  test::TempDir dir;
  std::ofstream(dir / "hyp")
      << "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n";
  std::ofstream(dir / "ref1")
      << "The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n";
  std::ofstream(dir / "ref2")
      << "The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n";
  std::ofstream(dir / "short") << "The dog bit the man.\n";
  auto r = run_command("chrf --ref " + (dir / "ref1") + " --ref " + (dir / "ref2") + " " +
                       (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(
                "chrF2 = 59.73\nnrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:rotor-", 0),
            0u)
      << r.output;
  r = run_command("chrf --ref " + (dir / "ref1") + " --ref " + (dir / "ref2") + " --json < " +
                  (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"score\": 59.7275178268"), std::string::npos) << r.output;
  r = run_command("chrf --ref " + (dir / "short") + " " + (dir / "hyp"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("hypothesis " + (dir / "hyp") + " has 3 lines but reference " +
                          (dir / "short") + " has 1 lines"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace rotor::eval
