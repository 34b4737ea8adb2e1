// SentencePiece wrapper: training with rotor's fixed reserved ids, load
// errors, and encode/decode round trips (tiny generated text always; the
// Multi30k 8k joint model where ../shared/data is present).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io.h"
#include "data/sentencepiece.h"
#include "data/synth_numbers.h"
#include "support/test_util.h"

namespace rotor::data {
namespace {

using rotor::test::TempDir;

std::string write_number_text(const TempDir& dir, const std::string& name, int n) {
  std::string path = dir / name;
  std::ofstream f(path);
  for (int i = 1; i <= n; ++i)
    f << number_to_english(i * 7) << " is " << number_to_german(i * 7) << ".\n";
  return path;
}

std::vector<std::string> read_lines(const std::string& path, size_t max) {
  std::ifstream f(path);
  std::vector<std::string> out;
  std::string line;
  while (out.size() < max && std::getline(f, line)) out.push_back(line);
  return out;
}

TEST(data_spm, TinyTrainReservedIdsAndRoundTrip) {
  TempDir dir;
  SpmTrainOptions o;
  o.inputs = {write_number_text(dir, "a.txt", 1500)};
  o.model_prefix = dir / "tiny";
  o.vocab_size = 300;
  o.user_defined_symbols = split_symbol_list("[MASK], [CLS],[SEP]");
  o.num_threads = 2;
  train_sentencepiece(o);
  Tokenizer t = Tokenizer::load(dir / "tiny.model");
  EXPECT_EQ(t.vocab_size(), 300);
  EXPECT_EQ(t.id_to_piece(kPadId), "<pad>");
  EXPECT_EQ(t.id_to_piece(kUnkId), "<unk>");
  EXPECT_EQ(t.id_to_piece(kBosId), "<s>");
  EXPECT_EQ(t.id_to_piece(kEosId), "</s>");
  EXPECT_EQ(t.id_to_piece(4), "[MASK]");
  EXPECT_EQ(t.id_to_piece(5), "[CLS]");
  EXPECT_EQ(t.id_to_piece(6), "[SEP]");
  EXPECT_EQ(t.piece_to_id("[CLS]"), 5);
  EXPECT_EQ(t.piece_to_id("no-such-piece-xyz"), kUnkId);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.eos_id(), 3);

  for (const std::string s : {"three hundred twenty-one is dreihunderteinundzwanzig.",
                              "seven thousand is siebentausend."}) {
    auto ids = t.encode(s);
    ASSERT_FALSE(ids.empty());
    for (int32_t id : ids) {
      EXPECT_GT(id, kEosId) << "encode never produces pad/bos/eos";
      EXPECT_LT(id, t.vocab_size());
    }
    EXPECT_EQ(t.decode(ids), s);
    // Control ids decode to nothing.
    std::vector<int32_t> framed = {kBosId};
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.push_back(kEosId);
    framed.push_back(kPadId);
    EXPECT_EQ(t.decode(framed), s);
  }
  auto masked = t.encode("[MASK] one");
  ASSERT_FALSE(masked.empty());
  EXPECT_NE(std::find(masked.begin(), masked.end(), 4), masked.end());
  EXPECT_THROW(t.decode(std::vector<int32_t>{100000}), Error);
  EXPECT_THROW(t.id_to_piece(-1), Error);
}

TEST(data_spm, UnigramTrains) {
  TempDir dir;
  SpmTrainOptions o;
  o.inputs = {write_number_text(dir, "a.txt", 800), write_number_text(dir, "b.txt", 300)};
  o.model_prefix = dir / "uni";
  o.vocab_size = 200;
  o.model_type = "unigram";
  o.input_sentence_size = 500;  // sampling path
  train_sentencepiece(o);
  Tokenizer t = Tokenizer::load(dir / "uni.model");
  EXPECT_EQ(t.id_to_piece(kEosId), "</s>");
  EXPECT_EQ(t.decode(t.encode("forty-two is zweiundvierzig.")), "forty-two is zweiundvierzig.");
}

TEST(data_spm, LoadErrorsNameTheFile) {
  TempDir dir;
  try {
    Tokenizer::load(dir / "missing.model");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
  std::string bad = dir / "corrupt.model";
  std::ofstream(bad) << "this is not a protobuf \x01\x02\x03 at all";
  try {
    Tokenizer::load(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.model"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
  }
}

TEST(data_spm, TrainOptionErrors) {
  TempDir dir;
  SpmTrainOptions o;
  o.model_prefix = dir / "m";
  o.inputs = {dir / "nope.txt"};
  EXPECT_THROW(train_sentencepiece(o), Error);
  o.inputs = {write_number_text(dir, "a.txt", 50)};
  o.vocab_size = 4;
  EXPECT_THROW(train_sentencepiece(o), Error);
  o.vocab_size = 100;
  o.model_type = "word2vec";
  EXPECT_THROW(train_sentencepiece(o), Error);
  o.model_type = "bpe";
  o.vocab_size = 100000;  // far more pieces than the text has: SentencePiece refuses
  EXPECT_THROW(train_sentencepiece(o), Error);
  o.vocab_size = 100;
  o.model_prefix = dir / "no/such/dir/m";
  EXPECT_THROW(train_sentencepiece(o), Error);
}

// The model appears whole or not at all: SentencePiece writes under a
// temporary prefix that is renamed into place only after training succeeded.
TEST(data_spm, TrainingPublishesAtomically) {
  TempDir dir;
  SpmTrainOptions o;
  o.inputs = {write_number_text(dir, "a.txt", 200)};
  o.model_prefix = dir / "m";
  o.vocab_size = 100000;  // far more pieces than the text holds: SentencePiece fails
  o.num_threads = 2;
  EXPECT_THROW(train_sentencepiece(o), Error);
  o.vocab_size = 120;
  std::ofstream(dir / "m.model") << "an old model";
  EXPECT_THROW(
      {
        SpmTrainOptions bad = o;
        bad.vocab_size = 100000;
        train_sentencepiece(bad);
      },
      Error);
  EXPECT_EQ(rotor::read_file(dir / "m.model"), "an old model") << "a failed training replaced it";
  train_sentencepiece(o);
  EXPECT_EQ(Tokenizer::load(dir / "m.model").vocab_size(), 120);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST(data_spm, SplitSymbolList) {
  EXPECT_EQ(split_symbol_list("[MASK],[CLS],[SEP]"),
            (std::vector<std::string>{"[MASK]", "[CLS]", "[SEP]"}));
  EXPECT_EQ(split_symbol_list(" a , ,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(split_symbol_list("").empty());
}

TEST(data_spm, Multi30kJoint8kRoundTrip) {
  ROTOR_REQUIRE_SHARED_DATA("multi30k/train.en");
  const std::string d = rotor::test::shared_data_dir() + "/multi30k/";
  TempDir dir;
  SpmTrainOptions o;
  o.inputs = {d + "train.en", d + "train.de"};
  o.model_prefix = dir / "m30k";
  o.vocab_size = 8000;
  o.num_threads = 2;
  train_sentencepiece(o);
  Tokenizer t = Tokenizer::load(dir / "m30k.model");
  EXPECT_EQ(t.vocab_size(), 8000);
  // SentencePiece applies NFKC (e.g. a no-break space becomes a space), so a
  // few lines come back normalized; decoding then re-encoding is exact.
  size_t checked = 0, exact = 0, unknown = 0;
  for (const char* file : {"val.en", "val.de"}) {
    for (const auto& line : read_lines(d + file, 300)) {
      auto ids = t.encode(line);
      for (int32_t id : ids) unknown += t.is_unknown(id);
      std::string back = t.decode(ids);
      exact += back == line;
      EXPECT_EQ(t.encode(back), ids) << line;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 600u);
  EXPECT_GE(exact, 590u);
  EXPECT_LE(unknown, 5u) << "character_coverage 1.0 over both languages";
}

}  // namespace
}  // namespace rotor::data
