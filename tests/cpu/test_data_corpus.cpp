// Binarized corpora: writer/reader round trip, the files' error cases, and
// `prepare` (cleaning, order, errors that name the file and line).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/corpus.h"
#include "data/prepare.h"
#include "data/sentencepiece.h"
#include "data/synth_numbers.h"
#include "support/test_util.h"

namespace rotor::data {
namespace {

namespace fs = std::filesystem;
using rotor::test::TempDir;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

TEST(data_corpus, WriteAndReadBack) {
  TempDir dir;
  PhiloxRng rng(7, 1);
  std::vector<std::vector<int32_t>> sents;
  for (int i = 0; i < 500; ++i) {
    std::vector<int32_t> s(rng.below(40));  // includes empty sentences
    for (auto& x : s) x = static_cast<int32_t>(rng.below(1000));
    sents.push_back(s);
  }
  {
    CorpusWriter w(dir / "c", 1000);
    for (auto& s : sents) w.add(s);
    EXPECT_EQ(w.size(), 500u);
    w.finish();
  }
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_FALSE(contains(e.path().string(), ".tmp")) << e.path();
  MmapCorpus c = MmapCorpus::open(dir / "c");
  ASSERT_EQ(c.size(), 500u);
  EXPECT_EQ(c.vocab_size(), 1000u);
  uint64_t total = 0;
  for (size_t i = 0; i < sents.size(); ++i) {
    auto s = c.sentence(i);
    EXPECT_EQ(std::vector<int32_t>(s.begin(), s.end()), sents[i]);
    EXPECT_EQ(c.length(i), static_cast<int64_t>(sents[i].size()));
    total += sents[i].size();
  }
  EXPECT_EQ(c.num_tokens(), total);
  EXPECT_EQ(fs::file_size(dir / "c.bin"), total * 4);
  EXPECT_EQ(fs::file_size(dir / "c.idx"), kIdxHeaderBytes + 8 * 501);
  MmapCorpus moved = std::move(c);
  EXPECT_EQ(moved.size(), 500u);
}

TEST(data_corpus, UnfinishedWriterLeavesNothing) {
  TempDir dir;
  {
    CorpusWriter w(dir / "c", 10);
    w.add(std::vector<int32_t>{1, 2, 3});
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(data_corpus, OpenErrors) {
  TempDir dir;
  {
    CorpusWriter w(dir / "c", 10);
    for (int i = 0; i < 20; ++i) w.add(std::vector<int32_t>{1, 2, 3, 4});
    w.finish();
  }
  auto msg = error_of([&] { MmapCorpus::open(dir / "missing"); });
  EXPECT_TRUE(contains(msg, "missing.idx") && contains(msg, "no such file")) << msg;

  fs::copy_file(dir / "c.idx", dir / "nobin.idx");
  msg = error_of([&] { MmapCorpus::open(dir / "nobin"); });
  EXPECT_TRUE(contains(msg, "nobin.bin")) << msg;

  fs::copy_file(dir / "c.idx", dir / "t.idx");
  fs::copy_file(dir / "c.bin", dir / "t.bin");
  fs::resize_file(dir / "t.bin", 4 * 79);
  msg = error_of([&] { MmapCorpus::open(dir / "t"); });
  EXPECT_TRUE(contains(msg, "t.bin") && contains(msg, "truncated")) << msg;

  fs::copy_file(dir / "c.idx", dir / "ti.idx");
  fs::copy_file(dir / "c.bin", dir / "ti.bin");
  fs::resize_file(dir / "ti.idx", kIdxHeaderBytes + 8 * 5);
  msg = error_of([&] { MmapCorpus::open(dir / "ti"); });
  EXPECT_TRUE(contains(msg, "ti.idx") && contains(msg, "truncated")) << msg;
  fs::resize_file(dir / "ti.idx", 10);
  msg = error_of([&] { MmapCorpus::open(dir / "ti"); });
  EXPECT_TRUE(contains(msg, "ti.idx") && contains(msg, "truncated")) << msg;

  write_text(dir / "m.idx", std::string(200, 'x'));
  fs::copy_file(dir / "c.bin", dir / "m.bin");
  msg = error_of([&] { MmapCorpus::open(dir / "m"); });
  EXPECT_TRUE(contains(msg, "m.idx") && contains(msg, "bad magic")) << msg;
}

// A token count whose byte size (x 4) wraps around to 0 must not match an
// empty .bin (found by tests/fuzz/fuzz_corpus.cpp).
TEST(data_corpus, TokenCountOverflow) {
  TempDir dir;
  const uint64_t tokens = uint64_t{1} << 62;
  std::string idx(kIdxMagic, 8);
  auto put = [&](auto v) { idx.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(kIdxVersion);
  put(kIdxDtypeI32);
  for (uint64_t v : {uint64_t{1}, uint64_t{100}, tokens, uint64_t{0}, uint64_t{0}, tokens}) put(v);
  write_text(dir / "o.idx", idx);
  write_text(dir / "o.bin", "");
  const auto msg = error_of([&] { MmapCorpus::open(dir / "o"); });
  EXPECT_TRUE(contains(msg, "o.bin") && contains(msg, "truncated")) << msg;
}

// One tiny SentencePiece model shared by the prepare tests.
class data_prepare : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    std::ofstream f(*dir_ / "text.txt");
    for (int i = 1; i <= 1200; ++i)
      f << number_to_english(i * 13) << "\n" << number_to_german(i * 13) << "\n";
    f.close();
    SpmTrainOptions o;
    o.inputs = {*dir_ / "text.txt"};
    o.model_prefix = *dir_ / "spm";
    o.vocab_size = 250;
    train_sentencepiece(o);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return *dir_ / "spm.model"; }
  static TempDir* dir_;
  TempDir tmp_;
};
TempDir* data_prepare::dir_ = nullptr;

TEST_F(data_prepare, ParallelRoundTripAndCleaning) {
  std::string src, tgt;
  std::vector<std::pair<std::string, std::string>> kept;
  for (int i = 1; i <= 300; ++i) {
    std::string e = number_to_english(i * 101), d = number_to_german(i * 101);
    if (i % 50 == 0) e = "";  // empty side
    src += e + "\n";
    tgt += d + (i % 3 == 0 ? "\r\n" : "\n");  // CRLF is tolerated
    if (i % 50 != 0) kept.emplace_back(e, d);
  }
  write_text(tmp_ / "a.en", src);
  write_text(tmp_ / "a.de", tgt);
  PrepareOptions o;
  o.spm_model = model();
  o.src = tmp_ / "a.en";
  o.tgt = tmp_ / "a.de";
  o.output_prefix = tmp_ / "out";
  o.num_threads = 3;
  o.chunk_lines = 64;   // several rounds, order preserved across them
  o.max_len_ratio = 0;  // off here; tested below
  PrepareStats st = prepare_corpus(o);
  EXPECT_EQ(st.lines, 300);
  EXPECT_EQ(st.dropped_empty, 6);
  EXPECT_EQ(st.dropped_ratio, 0);
  EXPECT_EQ(st.kept, static_cast<int64_t>(kept.size()));
  EXPECT_TRUE(contains(st.summary(), "kept 294")) << st.summary();
  Tokenizer tok = Tokenizer::load(model());
  MmapCorpus cs = MmapCorpus::open(tmp_ / "out.src"), ct = MmapCorpus::open(tmp_ / "out.tgt");
  ASSERT_EQ(cs.size(), kept.size());
  ASSERT_EQ(ct.size(), kept.size());
  EXPECT_EQ(cs.vocab_size(), 250u);
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(tok.decode(cs.sentence(i)), kept[i].first);
    EXPECT_EQ(tok.decode(ct.sentence(i)), kept[i].second);
  }
  EXPECT_EQ(st.src_tokens, static_cast<int64_t>(cs.num_tokens()));

  // max_len drops long sentences; append_eos stores </s>.
  o.max_len = 6;
  o.append_eos = true;
  o.output_prefix = tmp_ / "short";
  st = prepare_corpus(o);
  EXPECT_GT(st.dropped_long, 0);
  MmapCorpus s2 = MmapCorpus::open(tmp_ / "short.src");
  for (size_t i = 0; i < s2.size(); ++i) {
    EXPECT_LE(s2.length(i), 7);
    EXPECT_EQ(s2.sentence(i).back(), kEosId);
  }
}

TEST_F(data_prepare, LengthRatio) {
  // "one" is one or two tokens; ten German numbers in a row are many more.
  std::string long_de;
  for (int i = 0; i < 10; ++i) long_de += number_to_german(987654 - i) + " ";
  write_text(tmp_ / "r.en", "one\nfive hundred\nseven\n");
  write_text(tmp_ / "r.de", long_de + "\nfünfhundert\n" + long_de + "\n");
  PrepareOptions o;
  o.spm_model = model();
  o.src = tmp_ / "r.en";
  o.tgt = tmp_ / "r.de";
  o.output_prefix = tmp_ / "ratio";
  o.max_len_ratio = 5.0;
  auto st = prepare_corpus(o);
  EXPECT_EQ(st.dropped_ratio, 2);
  EXPECT_EQ(st.kept, 1);
  o.max_len_ratio = 0;
  st = prepare_corpus(o);
  EXPECT_EQ(st.kept, 3);
}

TEST_F(data_prepare, Monolingual) {
  write_text(tmp_ / "m.txt", "one hundred\n\nforty-two\nsiebzehn\n");
  PrepareOptions o;
  o.spm_model = model();
  o.src = tmp_ / "m.txt";
  o.output_prefix = tmp_ / "mono";
  auto st = prepare_corpus(o);
  EXPECT_EQ(st.kept, 3);
  EXPECT_EQ(st.dropped_empty, 1);
  MmapCorpus c = MmapCorpus::open(tmp_ / "mono");
  Tokenizer tok = Tokenizer::load(model());
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(tok.decode(c.sentence(2)), "siebzehn");
}

TEST_F(data_prepare, Errors) {
  PrepareOptions o;
  o.spm_model = model();
  o.output_prefix = tmp_ / "out";

  write_text(tmp_ / "a.en", "one\ntwo\nthree\n");
  write_text(tmp_ / "a.de", "eins\nzwei\n");
  o.src = tmp_ / "a.en";
  o.tgt = tmp_ / "a.de";
  auto msg = error_of([&] { prepare_corpus(o); });
  EXPECT_TRUE(contains(msg, "a.en has 3 lines") && contains(msg, "a.de has 2 lines")) << msg;

  write_text(tmp_ / "e.en", "");
  write_text(tmp_ / "e.de", "");
  o.src = tmp_ / "e.en";
  o.tgt = tmp_ / "e.de";
  msg = error_of([&] { prepare_corpus(o); });
  EXPECT_TRUE(contains(msg, "empty corpus") && contains(msg, "e.en")) << msg;

  write_text(tmp_ / "blank.en", "\n\n");
  write_text(tmp_ / "blank.de", "\n\n");
  o.src = tmp_ / "blank.en";
  o.tgt = tmp_ / "blank.de";
  msg = error_of([&] { prepare_corpus(o); });
  EXPECT_TRUE(contains(msg, "empty corpus")) << msg;

  write_text(tmp_ / "u.en", "one\ntwo\nthree\n");
  write_text(tmp_ / "u.de", "eins\nzw\xC3\x28i\ndrei\n");
  o.src = tmp_ / "u.en";
  o.tgt = tmp_ / "u.de";
  msg = error_of([&] { prepare_corpus(o); });
  EXPECT_TRUE(contains(msg, "u.de:2") && contains(msg, "invalid UTF-8")) << msg;

  o.src = tmp_ / "none.en";
  msg = error_of([&] { prepare_corpus(o); });
  EXPECT_TRUE(contains(msg, "none.en") && contains(msg, "no such file")) << msg;

  o.src = tmp_ / "u.en";
  o.tgt = "";
  o.spm_model = tmp_ / "nomodel.model";
  msg = error_of([&] { prepare_corpus(o); });
  EXPECT_TRUE(contains(msg, "nomodel.model")) << msg;

  // No output and no temporary file was left by any failure.
  for (const auto& e : fs::directory_iterator(tmp_.path())) {
    EXPECT_FALSE(contains(e.path().filename().string(), "out")) << e.path();
  }
}

TEST(data_corpus, Utf8Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("dreißig f\xC3\xBC"
                              "nf \xE2\x82\xAC \xF0\x9F\x98\x80"),
            std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);            // lone continuation
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong
  EXPECT_EQ(find_invalid_utf8("x\xE0\x80\xAF"), 1u);     // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);      // surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // > U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ok\xE2\x82"), 2u);        // truncated at the end
}

}  // namespace
}  // namespace rotor::data
