// The byte mode of data::Tokenizer (data/sentencepiece.h): UTF-8 bytes after
// the reserved ids and the user-defined symbols, and the text file that
// describes it.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/io.h"
#include "data/sentencepiece.h"
#include "data/utf8.h"

namespace rotor::data {

namespace {

constexpr std::string_view kMagic = "rotor-byte-tokenizer 1";
constexpr std::string_view kSymbol = "symbol ";
constexpr const char* kReserved[] = {"<pad>", "<unk>", "<s>", "</s>"};

// Why `symbol` cannot be one ("" when it can), given those before it.
std::string bad_symbol(const std::string& symbol, const std::set<std::string>& before) {
  if (symbol.empty()) return "an empty symbol";
  if (symbol.find_first_of("\r\n") != std::string::npos)
    return fmt::format("symbol {:?} holds a line break", symbol);
  for (const char* r : kReserved)
    if (symbol == r) return fmt::format("symbol {} is already reserved", symbol);
  if (before.count(symbol)) return fmt::format("symbol {} is given twice", symbol);
  return "";
}

std::string byte_piece(unsigned char b) {
  return fmt::format("<0x{:02X}>", b);
}

}  // namespace

std::string byte_tokenizer_text(const std::vector<std::string>& symbols) {
  std::string text(kMagic);
  text += '\n';
  for (const auto& s : symbols) text += std::string(kSymbol) + s + '\n';
  return text;
}

void write_byte_tokenizer(const std::string& path, const std::vector<std::string>& symbols) {
  std::set<std::string> seen;
  for (const auto& s : symbols) {
    if (std::string why = bad_symbol(s, seen); !why.empty())
      ROTOR_FAIL("byte tokenizer {}: {}", path, why);
    seen.insert(s);
  }
  atomic_write_file(path, byte_tokenizer_text(symbols));
}

Tokenizer Tokenizer::bytes(std::vector<std::string> symbols) {
  std::set<std::string> seen;
  for (const auto& s : symbols) {
    if (std::string why = bad_symbol(s, seen); !why.empty()) ROTOR_FAIL("byte tokenizer: {}", why);
    seen.insert(s);
  }
  Tokenizer t;
  t.kind_ = TokenizerKind::Bytes;
  t.symbols_ = std::move(symbols);
  t.loaded_ = true;
  return t;
}

Tokenizer Tokenizer::load_bytes(const std::string& path, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the magic line, checked by the caller
  std::vector<std::string> symbols;
  std::set<std::string> seen;
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.rfind(kSymbol, 0) != 0)
      ROTOR_FAIL("byte tokenizer {}:{}: expected \"symbol TEXT\", got {:?}", path, n, line);
    std::string s = line.substr(kSymbol.size());
    if (std::string why = bad_symbol(s, seen); !why.empty())
      ROTOR_FAIL("byte tokenizer {}:{}: {}", path, n, why);
    seen.insert(s);
    symbols.push_back(std::move(s));
  }
  Tokenizer t = Tokenizer::bytes(std::move(symbols));
  t.path_ = path;
  return t;
}

bool Tokenizer::is_bytes_text(std::string_view head) {
  return head.substr(0, kMagic.size()) == kMagic &&
         (head.size() == kMagic.size() || head[kMagic.size()] == '\n');
}

int32_t Tokenizer::byte_id(unsigned char b) const {
  ROTOR_CHECK(is_bytes(), "byte_id of a SentencePiece tokenizer");
  return 4 + static_cast<int32_t>(symbols_.size()) + b;
}

std::vector<int32_t> Tokenizer::encode_bytes(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    // A user-defined symbol is one id (the longest that starts here).
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t k = 0; k < symbols_.size(); ++k) {
      const std::string& s = symbols_[k];
      if (s.size() > best_len && text.substr(i, s.size()) == s) {
        best = 4 + static_cast<int32_t>(k);
        best_len = s.size();
      }
    }
    if (best >= 0) {
      ids.push_back(best);
      i += best_len;
    } else {
      ids.push_back(byte_id(static_cast<unsigned char>(text[i])));
      ++i;
    }
  }
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids) const {
  const int32_t n = vocab_size();
  const int32_t first_byte = 4 + static_cast<int32_t>(symbols_.size());
  std::string raw;
  raw.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= n) ROTOR_FAIL("decode: token id {} out of range [0, {})", id, n);
    if (id >= first_byte)
      raw.push_back(static_cast<char>(id - first_byte));
    else if (id >= 4)
      raw += symbols_[static_cast<size_t>(id - 4)];
    else if (id == kUnkId)
      raw += "\xEF\xBF\xBD";  // never produced by encode
  }
  return to_valid_utf8(raw);
}

std::string Tokenizer::bytes_piece(int32_t id) const {
  if (id < 4) return kReserved[id];
  const size_t k = static_cast<size_t>(id - 4);
  if (k < symbols_.size()) return symbols_[k];
  return byte_piece(static_cast<unsigned char>(k - symbols_.size()));
}

int32_t Tokenizer::bytes_piece_id(std::string_view piece) const {
  const std::vector<std::string>& symbols = symbols_;
  for (int32_t i = 0; i < 4; ++i)
    if (piece == kReserved[i]) return i;
  for (size_t k = 0; k < symbols.size(); ++k)
    if (piece == symbols[k]) return 4 + static_cast<int32_t>(k);
  // "<0xNN>", as id_to_piece writes it.
  if (piece.size() == 6 && piece.substr(0, 3) == "<0x" && piece[5] == '>') {
    unsigned v = 0;
    for (char ch : piece.substr(3, 2)) {
      const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                    : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                                                                 : -1;
      if (d < 0) return kUnkId;
      v = v * 16 + static_cast<unsigned>(d);
    }
    return 4 + static_cast<int32_t>(symbols.size()) + static_cast<int32_t>(v);
  }
  return kUnkId;
}

}  // namespace rotor::data
