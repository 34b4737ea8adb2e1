// BLEU and chrF by bucket of source length (eval/length_buckets.h) and
// `rotor bleu --by-length`: bucket edges, empty buckets, each bucket's
// scores equal to corpus scores of its lines, line-count errors.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/json_io.h"
#include "eval/length_buckets.h"
#include "support/test_util.h"

namespace rotor::eval {
namespace {

TEST(LengthBuckets, ParseEdges) {
  EXPECT_EQ(parse_length_edges("0,10,20,40"), (std::vector<int64_t>{0, 10, 20, 40}));
  EXPECT_EQ(parse_length_edges("10,20"), (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(parse_length_edges("0"), (std::vector<int64_t>{0}));
  EXPECT_EQ(parse_length_edges(kDefaultLengthEdges).size(), 7u);
  for (const char* bad : {"", "a", "10,10", "20,10", "-1,5", "1,,2", "1.5", "0,10,", " 5"})
    EXPECT_THROW(parse_length_edges(bad), Error) << bad;
  try {
    parse_length_edges("0,20,10");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got 10 after 20 in \"0,20,10\""), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parse_length_unit("chars"), LengthUnit::kChars);
  EXPECT_THROW(parse_length_unit("tokens"), Error);
}

TEST(LengthBuckets, SourceLength) {
  EXPECT_EQ(source_length("  two  hundred\tthree ", LengthUnit::kWords), 3);
  EXPECT_EQ(source_length("", LengthUnit::kWords), 0);
  EXPECT_EQ(source_length("zwölf  ", LengthUnit::kChars), 5);  // code points, not bytes
  EXPECT_EQ(source_length("a b", LengthUnit::kChars), 3);
}

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i ? " w" : "w";
  return s;
}

TEST(LengthBuckets, EdgesAndScoresPerBucket) {
  // Source lengths 0, 9 | 10, 19 | 20 | (none in 40+) with edges 0,10,20,40.
  const std::vector<std::string> src = {words(0), words(9), words(10), words(19), words(20)};
  const std::vector<std::string> hyp = {"the cat sat on the mat", "a b c d e", "one two three four",
                                        "x y z", "the dog bit the man"};
  const std::vector<std::string> ref = {"the cat sat on a mat", "a b c d e", "one two four three",
                                        "x y q", "the dog bit the man ."};
  const LengthScores s = score_by_length(src, hyp, {ref}, {0, 10, 20, 40}, LengthUnit::kWords);
  ASSERT_EQ(s.buckets.size(), 4u);
  const std::vector<std::string> names = {"0-9", "10-19", "20-39", "40+"};
  const std::vector<int64_t> lines = {2, 2, 1, 0}, lengths = {9, 29, 20, 0};
  const std::vector<std::pair<size_t, size_t>> span = {{0, 2}, {2, 4}, {4, 5}, {5, 5}};
  for (size_t j = 0; j < 4; ++j) {
    const LengthBucket& b = s.buckets[j];
    EXPECT_EQ(bucket_name(b), names[j]);
    EXPECT_EQ(b.lines, lines[j]) << names[j];
    EXPECT_EQ(b.source_length, lengths[j]) << names[j];
    if (b.lines == 0) {  // an empty bucket is reported, with no scores
      EXPECT_EQ(b.bleu.score, 0.0);
      EXPECT_EQ(b.bleu.hyp_len, 0);
      EXPECT_TRUE(b.chrf.stats.empty());
      continue;
    }
    const std::vector<std::string> h(hyp.begin() + span[j].first, hyp.begin() + span[j].second);
    const std::vector<std::string> r(ref.begin() + span[j].first, ref.begin() + span[j].second);
    EXPECT_DOUBLE_EQ(b.bleu.score, corpus_bleu(h, {r}).score) << names[j];
    EXPECT_EQ(b.bleu.hyp_len, corpus_bleu(h, {r}).hyp_len) << names[j];
    EXPECT_DOUBLE_EQ(b.chrf.score, corpus_chrf(h, {r}).score) << names[j];
  }
  EXPECT_DOUBLE_EQ(s.buckets[1].bleu.score,
                   corpus_bleu({hyp[2], hyp[3]}, {{ref[2], ref[3]}}).score);
  EXPECT_EQ(s.all.lines, 5);
  EXPECT_DOUBLE_EQ(s.all.bleu.score, corpus_bleu(hyp, {ref}).score);
  EXPECT_DOUBLE_EQ(s.all.chrf.score, corpus_chrf(hyp, {ref}).score);
  // A length on an edge opens the next bucket: 10 is in 10-19, not 0-9.
  const LengthScores one =
      score_by_length({words(10)}, {"a"}, {{"a"}}, {0, 10}, LengthUnit::kWords);
  EXPECT_EQ(one.buckets[0].lines, 0);
  EXPECT_EQ(one.buckets[1].lines, 1);
  EXPECT_EQ(bucket_name(one.buckets[1]), "10+");
  EXPECT_DOUBLE_EQ(one.buckets[1].chrf.score, 100.0);  // "a" against "a"
  // Characters instead of words.
  const LengthScores c =
      score_by_length({"abc", "abcdef"}, {"x", "y"}, {{"x", "z"}}, {0, 4}, LengthUnit::kChars);
  EXPECT_EQ(c.buckets[0].lines, 1);
  EXPECT_EQ(c.buckets[1].source_length, 6);
  EXPECT_EQ(c.buckets[1].bleu.hyp_len, 1);
}

TEST(LengthBuckets, MismatchedLinesFail) {
  EXPECT_THROW(score_by_length({"a", "b"}, {"a"}, {{"a"}}, {0}, LengthUnit::kWords), Error);
  EXPECT_THROW(score_by_length({"a"}, {"a"}, {{"a", "b"}}, {0}, LengthUnit::kWords), Error);
  EXPECT_THROW(score_by_length({"a"}, {"a"}, {}, {0}, LengthUnit::kWords), Error);
  EXPECT_THROW(score_by_length({"a"}, {"a"}, {{"a"}}, {5, 10}, LengthUnit::kWords), Error);
}

// ---- rotor bleu --by-length ---------------------------------------------------

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
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

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

class BleuByLength : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_ / "src", "one\nthree hundred\ntwo thousand and five\nsix\n");
    write_file(dir_ / "hyp", "eins\ndreihundert\nzweitausendundfunf\nsechs\n");
    write_file(dir_ / "ref", "eins\ndreihundert\nzweitausendundfünf\nsieben\n");
  }
  std::string files() const { return "--ref " + (dir_ / "ref") + " " + (dir_ / "hyp"); }
  test::TempDir dir_;
};

TEST_F(BleuByLength, TableAndJson) {
  auto r = run_command("bleu -t char " + files() + " --by-length " + (dir_ / "src") +
                       " --buckets 0,2,4,10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BLEU and chrF2 by source length (words of " + (dir_ / "src") + "):"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("       0-1        2      1.00"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("       2-3        1      2.00   100.00   100.00   1.000"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("       4-9        1      4.00"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("       10+        0         -        -        -       -"),
            std::string::npos)
      << r.output;
  const auto corpus = run_command("bleu -t char -b " + files());
  ASSERT_EQ(corpus.exit_code, 0) << corpus.output;
  const std::string all = corpus.output.substr(0, corpus.output.size() - 1);
  EXPECT_NE(
      r.output.find("       all        4      2.00 " + std::string(8 - all.size(), ' ') + all),
      std::string::npos)
      << r.output << " vs " << all;
  EXPECT_NE(r.output.find("BLEU nrefs:1|case:mixed|eff:no|tok:char"), std::string::npos);

  r = run_command("bleu -t char " + files() + " --by-length " + (dir_ / "src") +
                  " --buckets 2,4,10 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json_io::Json j = json_io::Json::parse(r.output);
  EXPECT_EQ(j["unit"], "words");
  ASSERT_EQ(j["buckets"].size(), 4u);  // [0,2) added before the first edge
  EXPECT_EQ(j["buckets"][0]["from"], 0);
  EXPECT_EQ(j["buckets"][0]["to"], 2);
  EXPECT_EQ(j["buckets"][0]["lines"], 2);
  EXPECT_DOUBLE_EQ(j["buckets"][1]["bleu"].get<double>(), 100.0);
  EXPECT_TRUE(j["buckets"][3]["to"].is_null());
  EXPECT_EQ(j["buckets"][3]["lines"], 0);
  EXPECT_TRUE(j["buckets"][3]["bleu"].is_null());
  EXPECT_TRUE(j["buckets"][3]["chrf"].is_null());
  EXPECT_EQ(j["all"]["lines"], 4);
  EXPECT_NEAR(j["all"]["bleu"].get<double>(), std::stod(all), 0.005);
  EXPECT_FALSE(j["all"].contains("from"));

  r = run_command("bleu " + files() + " --by-length " + (dir_ / "src") +
                  " --length-unit chars --buckets 0,5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json_io::Json c = json_io::Json::parse(r.output);
  EXPECT_EQ(c["unit"], "chars");
  EXPECT_EQ(c["buckets"][0]["lines"], 2);  // "one", "six"
  EXPECT_EQ(c["buckets"][1]["lines"], 2);
}

TEST_F(BleuByLength, BadInputsAreOneLineErrors) {
  write_file(dir_ / "short", "one\nthree hundred\n");
  auto r = run_command("bleu " + files() + " --by-length " + (dir_ / "short"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--by-length source " + (dir_ / "short") +
                          " has 2 lines but hypothesis " + (dir_ / "hyp") + " has 4 lines"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --buckets 0,10", "--buckets and --length-unit apply to --by-length"},
           {" --by-length " + (dir_ / "src") + " --buckets 10,5", "got 5 after 10"},
           {" --by-length " + (dir_ / "src") + " --buckets x", "got \"x\""},
           {" --by-length " + (dir_ / "src") + " --length-unit bytes",
            "unknown source length unit"},
           {" --by-length " + (dir_ / "src") + " -b", "--score-only prints one score"},
           {" --by-length " + (dir_ / "nope"), "no such file"}}) {
    r = run_command("bleu " + files() + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

}  // namespace
}  // namespace rotor::eval
