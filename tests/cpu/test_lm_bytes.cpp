// Task lm with data.tokenizer: bytes, end to end through the rotor binary: no
// SentencePiece model is trained, the stream is the text's bytes (line
// breaks, blank lines and multi-byte characters included), bits per byte are
// exact (one byte per token), checkpoints carry the byte tokenizer and a
// resumed run restores it; conflicting keys are one-line config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "data/sentencepiece.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::run_rotor;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

// Text with blank lines, \r\n, and 2-, 3- and 4-byte characters.
std::string text(int lines, int seed) {
  static const char* words[] = {"the",   "rotary",           "Grüße", "中文",     "key",
                                "query", "\xF0\x9F\x98\x80", "naïve", "position", "byte",
                                "token"};
  std::string out;
  for (int i = 0; i < lines; ++i) {
    const int n = 3 + (i * 7 + seed) % 6;
    for (int k = 0; k < n; ++k)
      out += std::string(k ? " " : "") + words[(i * 5 + k * 3 + seed) % 11];
    out += i % 9 == 4 ? "\r\n" : "\n";
    if (i % 5 == 2) out += "\n";
  }
  return out;
}

class LmBytes : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "train.txt", std::ios::binary) << text(60, 1);
    std::ofstream(dir_ / "valid.txt", std::ios::binary) << text(12, 4);
    rotor::test::tiny_lm(dir_ / "train.txt", dir_ / "valid.txt", "unused")
        .erase("data.vocab_size")
        .set("data.tokenizer", "bytes")
        .write(dir_ / "lm.yaml");
  }
  RunResult train(const std::string& run, const std::string& extra = "") {
    return run_rotor(
        dir_, "train " + (dir_ / "lm.yaml") + " --set output_dir=" + (dir_ / run) + " " + extra,
        "OMP_NUM_THREADS=1");
  }
  std::map<int64_t, std::string> train_losses(const std::string& run) {
    std::map<int64_t, std::string> out;
    std::ifstream f(dir_ / (run + "/metrics.jsonl"));
    const std::regex re("\"step\":([0-9]+),\"split\":\"train\",\"loss\":([0-9.e+-]+)");
    std::smatch m;
    for (std::string line; std::getline(f, line);)
      if (std::regex_search(line, m, re)) out[std::stoll(m[1])] = m[2];
    return out;
  }
  TempDir dir_;
};

TEST_F(LmBytes, TrainsOnBytesWithExactBitsPerByteAndResumes) {
  RunResult r = train("full");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = r.out + r.err;
  EXPECT_NE(log.find("byte tokenizer"), std::string::npos) << log;
  EXPECT_NE(log.find("260 ids"), std::string::npos) << log;
  EXPECT_EQ(log.find("SentencePiece"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir_ / "full/spm.model"));
  // The validation: every byte of the text but the first is one scored
  // token, and bits per byte are the loss per token in bits.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex("valid at update 4 \\| loss ([0-9.]+) \\| ppl [0-9.]+ \\| acc [0-9.]+ \\| bpb "
                 "([0-9.]+) \\| non-overlapping blocks of 16 tokens \\| ([0-9]+) tokens")))
      << log;
  const double loss = std::stod(m[1]), bpb = std::stod(m[2]);
  EXPECT_EQ(std::stoll(m[3]), static_cast<long long>(fs::file_size(dir_ / "valid.txt")) - 1);
  EXPECT_NEAR(bpb, loss / std::log(2.0), 2e-3 * bpb);
  // It learns: the validation at update 4 is better than at update 2.
  std::smatch m2;
  ASSERT_TRUE(std::regex_search(log, m2, std::regex("valid at update 2 \\| loss ([0-9.]+)")));
  EXPECT_LT(loss, std::stod(m2[1]));

  // The checkpoint holds the byte tokenizer where a SentencePiece run keeps
  // its model: loading it gives the byte mode back.
  const auto tok = rotor::data::Tokenizer::load(dir_ / "full/checkpoints/step_4/spm.model");
  EXPECT_TRUE(tok.is_bytes());
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.decode(tok.encode(text(3, 2))), text(3, 2));

  // 2 updates, then --resume to 4 with the run's tokenizer file gone: the run
  // writes it again from the config and continues exactly.
  r = train("split", "--set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::remove(dir_ / "split/tokenizer.bytes"));
  r = train("split", "--resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(rotor::data::Tokenizer::load(dir_ / "split/tokenizer.bytes").is_bytes());
  const auto full = train_losses("full"), split = train_losses("split");
  ASSERT_EQ(full.size(), 4u);
  EXPECT_EQ(full, split);

  // A resume that asks for the other kind of tokenizer is refused, one line.
  r = train("split", "--resume --set data.tokenizer=sentencepiece --set data.vocab_size=100");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("was trained with data.tokenizer bytes, the config says sentencepiece"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The SentencePiece keys conflict with bytes; an unknown kind is named.
TEST_F(LmBytes, ConflictingKeysAreOneLineErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"--set data.vocab_size=300", "data.vocab_size: 300 sizes a SentencePiece model"},
      {"--set data.spm_model=x.model", "data.spm_model: a key of the SentencePiece tokenizer"},
      {"--set data.spm_model_type=unigram", "data.spm_model_type: a key of the SentencePiece"},
      {"--set data.character_coverage=0.99", "data.character_coverage: a key of the SentencePiece"},
      {"--set data.tokenizer=chars", "data.tokenizer"},
  };
  for (const auto& [set, expect] : cases) {
    SCOPED_TRACE(set);
    RunResult r = train("bad", set);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "bad")) << "a rejected config created its run directory";
  }
}

// `rotor prepare` takes the byte tokenizer's file; a byte LM reads a prepared
// corpus only when its lines kept their line breaks (--keep-line-ends), and
// then scores the same bytes as from the raw text.
TEST_F(LmBytes, PreparedCorpusNeedsItsLineBreaks) {
  std::ofstream(dir_ / "tok.bytes") << "rotor-byte-tokenizer 1\n";
  for (const char* split : {"train", "valid"}) {
    const std::string args = std::string("prepare --spm ") + (dir_ / "tok.bytes") + " --src " +
                             (dir_ / (std::string(split) + ".txt")) + " --max-len 0 ";
    RunResult r =
        run_rotor(dir_, args + "--output-prefix " + (dir_ / (std::string("lines_") + split)));
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_rotor(dir_, args + "--keep-line-ends --output-prefix " +
                            (dir_ / (std::string("bytes_") + split)));
    ASSERT_EQ(r.code, 0) << r.err;
  }
  RunResult r = train("lines", "--set data.train=" + (dir_ / "lines_train") +
                                   " --set data.valid=" + (dir_ / "lines_valid"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("was prepared without its line breaks"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = train("bytes", "--set train.max_updates=2 --set data.train=" + (dir_ / "bytes_train") +
                         " --set data.valid=" + (dir_ / "bytes_valid"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string tokens =
      std::to_string(static_cast<long long>(fs::file_size(dir_ / "valid.txt")) - 1) + " tokens";
  EXPECT_NE((r.out + r.err).find("blocks of 16 tokens | " + tokens), std::string::npos)
      << r.out + r.err;
}

}  // namespace
