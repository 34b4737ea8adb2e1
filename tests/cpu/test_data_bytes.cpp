// The byte mode of data::Tokenizer (data.tokenizer: bytes): ids, round
// trips of any UTF-8, invalid bytes, the description file and its errors,
// and U+FFFD replacement of invalid UTF-8 (data/utf8.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io.h"
#include "data/sentencepiece.h"
#include "data/utf8.h"
#include "support/test_util.h"

namespace rotor::data {
namespace {

using rotor::test::TempDir;

const std::string kFffd = "\xEF\xBF\xBD";

TEST(data_bytes, IdsAndVocabulary) {
  const Tokenizer plain = Tokenizer::bytes({});
  EXPECT_TRUE(plain.is_bytes());
  EXPECT_EQ(plain.vocab_size(), 260);
  EXPECT_EQ(plain.byte_id('A'), 4 + 65);
  EXPECT_EQ(plain.encode("Ab\n"), (std::vector<int32_t>{69, 102, 14}));
  EXPECT_EQ(plain.id_to_piece(0), "<pad>");
  EXPECT_EQ(plain.id_to_piece(3), "</s>");
  EXPECT_EQ(plain.id_to_piece(4), "<0x00>");
  EXPECT_EQ(plain.id_to_piece(259), "<0xFF>");
  EXPECT_EQ(plain.piece_to_id("<0x41>"), 69);
  EXPECT_EQ(plain.piece_to_id("</s>"), kEosId);
  EXPECT_EQ(plain.piece_to_id("[MASK]"), kUnkId);
  EXPECT_EQ(plain.piece_to_id("<0xZZ>"), kUnkId);
  EXPECT_TRUE(plain.is_unknown(kUnkId));
  EXPECT_FALSE(plain.is_unknown(69));
  EXPECT_THROW(plain.id_to_piece(260), Error);

  const Tokenizer bert = Tokenizer::bytes({"[MASK]", "[CLS]", "[SEP]"});
  EXPECT_EQ(bert.vocab_size(), 263);
  EXPECT_EQ(bert.piece_to_id("[MASK]"), 4);
  EXPECT_EQ(bert.piece_to_id("[SEP]"), 6);
  EXPECT_EQ(bert.byte_id(0), 7);
  // A symbol in the text is one id, never split; the rest is bytes.
  EXPECT_EQ(bert.encode("a[MASK]b[SEP"),
            (std::vector<int32_t>{7 + 'a', 4, 7 + 'b', 7 + '[', 7 + 'S', 7 + 'E', 7 + 'P'}));
  EXPECT_EQ(bert.encode_pieces("[CLS]A"), (std::vector<std::string>{"[CLS]", "<0x41>"}));
  EXPECT_EQ(bert.decode(bert.encode("x [MASK] y")), "x [MASK] y");
}

TEST(data_bytes, RoundTripOfAnyUtf8) {
  const Tokenizer t = Tokenizer::bytes({});
  const std::vector<std::string> texts = {
      "",
      "plain ASCII, with\ttabs and \r\n line ends",
      "Grüße aus Köln",                               // 2-byte sequences
      "中文 日本語 한국어",                           // 3-byte
      "emoji \xF0\x9F\x98\x80 and \xF0\x90\x8D\x88",  // 4-byte
      std::string("nul \0 inside", 12),
  };
  for (const std::string& s : texts) {
    const std::vector<int32_t> ids = t.encode(s);
    EXPECT_EQ(ids.size(), s.size()) << s;  // one id per byte
    EXPECT_EQ(t.decode(ids), s) << s;
  }
  // Every byte value has its id, and the 256 ids decode back to them.
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = t.encode(all);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[static_cast<size_t>(b)], 4 + b);
}

TEST(data_bytes, InvalidUtf8DecodesToReplacementCharacters) {
  const Tokenizer t = Tokenizer::bytes({});
  auto ids = [&](std::initializer_list<int> bytes) {
    std::vector<int32_t> out;
    for (int b : bytes) out.push_back(t.byte_id(static_cast<unsigned char>(b)));
    return out;
  };
  EXPECT_EQ(t.decode(ids({'a', 0xFF, 'b'})), "a" + kFffd + "b");
  EXPECT_EQ(t.decode(ids({0x80})), kFffd);        // lone continuation
  EXPECT_EQ(t.decode(ids({0xE4, 0xB8})), kFffd);  // truncated: one U+FFFD
  EXPECT_EQ(t.decode(ids({0xE4, 0xB8, 'x'})), kFffd + "x");
  EXPECT_EQ(t.decode(ids({0xC0, 0xAF})), kFffd + kFffd);                // overlong
  EXPECT_EQ(t.decode(ids({0xED, 0xA0, 0x80})), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(t.decode(ids({0xF4, 0x90, 0x80, 0x80})), kFffd + kFffd + kFffd + kFffd);
  // Control ids decode to nothing, <unk> to U+FFFD; out of range throws.
  EXPECT_EQ(t.decode(std::vector<int32_t>{kBosId, 4 + 'o', 4 + 'k', kEosId, kPadId}), "ok");
  EXPECT_EQ(t.decode(std::vector<int32_t>{kUnkId}), kFffd);
  EXPECT_THROW(t.decode(std::vector<int32_t>{260}), Error);
  EXPECT_THROW(t.decode(std::vector<int32_t>{-1}), Error);
  // Whatever ids a model samples, the text is valid UTF-8.
  std::vector<int32_t> noise;
  for (int i = 0; i < 2000; ++i) noise.push_back(4 + (i * 7919 + 13) % 256);
  EXPECT_EQ(find_invalid_utf8(t.decode(noise)), std::string::npos);
  EXPECT_EQ(to_valid_utf8("Köln"), "Köln");
}

TEST(data_bytes, DescriptionFileRoundTrip) {
  TempDir dir;
  const std::string path = dir / "tokenizer.bytes";
  write_byte_tokenizer(path, {"[MASK]", "[CLS]", "[SEP]"});
  EXPECT_EQ(read_file(path), "rotor-byte-tokenizer 1\nsymbol [MASK]\nsymbol [CLS]\nsymbol [SEP]\n");
  const Tokenizer t = Tokenizer::load(path);
  EXPECT_TRUE(t.is_bytes());
  EXPECT_EQ(t.kind(), TokenizerKind::Bytes);
  EXPECT_EQ(t.path(), path);
  EXPECT_EQ(t.symbols(), (std::vector<std::string>{"[MASK]", "[CLS]", "[SEP]"}));
  EXPECT_EQ(t.vocab_size(), 263);
  write_byte_tokenizer(path, {});
  EXPECT_EQ(Tokenizer::load(path).vocab_size(), 260);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one holding: " << part;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(data_bytes, BadDescriptionsAndSymbols) {
  TempDir dir;
  const std::string path = dir / "t.bytes";
  std::ofstream(path) << "rotor-byte-tokenizer 1\nsymbol [MASK]\nsymbols [CLS]\n";
  expect_error([&] { Tokenizer::load(path); }, path + ":3: expected \"symbol TEXT\"");
  std::ofstream(path) << "rotor-byte-tokenizer 1\nsymbol [MASK]\nsymbol [MASK]\n";
  expect_error([&] { Tokenizer::load(path); }, path + ":3: symbol [MASK] is given twice");
  std::ofstream(path) << "rotor-byte-tokenizer 1\nsymbol </s>\n";
  expect_error([&] { Tokenizer::load(path); }, "symbol </s> is already reserved");
  std::ofstream(path) << "rotor-byte-tokenizer 1\nsymbol \n";
  expect_error([&] { Tokenizer::load(path); }, "an empty symbol");
  // Another version (or another file) is not a byte tokenizer.
  std::ofstream(path) << "rotor-byte-tokenizer 2\n";
  expect_error([&] { Tokenizer::load(path); }, "cannot load it, not a valid model");
  expect_error([&] { Tokenizer::load(dir / "missing"); }, "no such file");
  expect_error([&] { Tokenizer::bytes({"a\nb"}); }, "holds a line break");
  expect_error([&] { write_byte_tokenizer(path, {"<pad>"}); }, "already reserved");
}

}  // namespace
}  // namespace rotor::data
