// The tokenizer of a run: a SentencePiece model, or UTF-8 bytes
// (data.tokenizer: bytes); loading, encoding and decoding, and training
// SentencePiece models.
//
// Reserved ids are FIXED for every model rotor trains (the trainer is told so)
// and checked when a model is loaded, so the batcher, the models and the
// decoders can use them as constants:
//   0 <pad>  padding (never produced by encode)
//   1 <unk>  unknown piece
//   2 <s>    beginning of sentence (prepended to the decoder input)
//   3 </s>   end of sentence (appended to the source and the decoder output)
// User-defined symbols (e.g. [MASK],[CLS],[SEP]) follow in the given order:
// ids 4, 5, 6, ...; they are never split by encode.
//
// A byte tokenizer has the same reserved ids and user-defined symbols, then
// one id per byte value: byte b is id 4 + symbols + b (vocab_size 260 +
// symbols). Any byte string encodes (one id per byte, symbols aside), and
// decoding replaces invalid UTF-8 by U+FFFD. It is described by a small text
// file (write_byte_tokenizer), which a run and its checkpoints keep where a
// SentencePiece run keeps its model, so that Tokenizer::load restores either
// kind from the same place:
//   rotor-byte-tokenizer 1
//   symbol [MASK]
//   symbol [CLS]
//   ...
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace rotor::data {

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;

enum class TokenizerKind { SentencePiece, Bytes };

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Loads PATH: a SentencePiece model, or a byte tokenizer's description
  // (told apart by the file's first line). Throws rotor::Error naming the
  // file when it is missing, neither, uses other reserved ids than above, or
  // (bytes) has a bad line.
  static Tokenizer load(const std::string& path);
  // A byte tokenizer with these user-defined symbols (ids 4, 5, ...), not
  // read from a file (path() is ""). Throws on an empty, repeated or reserved
  // symbol, or one holding a line break.
  static Tokenizer bytes(std::vector<std::string> symbols);
  // The kind of tokenizer file PATH holds, from its first line only (Bytes
  // for a byte tokenizer's description, else SentencePiece); no validation.
  static TokenizerKind kind_of_file(const std::string& path);

  bool loaded() const { return loaded_; }
  TokenizerKind kind() const { return kind_; }
  bool is_bytes() const { return kind_ == TokenizerKind::Bytes; }
  const std::string& path() const { return path_; }
  // Bytes: the id of byte value b (0..255).
  int32_t byte_id(unsigned char b) const;
  // Bytes: the user-defined symbols (ids 4, 5, ...).
  const std::vector<std::string>& symbols() const { return symbols_; }

  // Thread-safe (const): prepare encodes from several threads at once.
  std::vector<int32_t> encode(std::string_view text) const;
  std::vector<std::string> encode_pieces(std::string_view text) const;
  // Control ids (pad, bos, eos) decode to nothing.
  std::string decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const;
  std::string id_to_piece(int32_t id) const;          // throws on an id out of range
  int32_t piece_to_id(std::string_view piece) const;  // unk_id() when absent
  bool is_unknown(int32_t id) const;

  int32_t pad_id() const { return kPadId; }
  int32_t unk_id() const { return kUnkId; }
  int32_t bos_id() const { return kBosId; }
  int32_t eos_id() const { return kEosId; }

 private:
  void require_loaded() const;
  // The byte mode (data/byte_tokenizer.cpp).
  static bool is_bytes_text(std::string_view head);  // a description's first bytes
  static Tokenizer load_bytes(const std::string& path, const std::string& text);
  std::vector<int32_t> encode_bytes(std::string_view text) const;
  std::string decode_bytes(std::span<const int32_t> ids) const;
  std::string bytes_piece(int32_t id) const;
  int32_t bytes_piece_id(std::string_view piece) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  bool loaded_ = false;
  TokenizerKind kind_ = TokenizerKind::SentencePiece;
  std::vector<std::string> symbols_;  // bytes: the user-defined symbols, ids 4, 5, ...
};

// The text of a byte tokenizer's description (what Tokenizer::load reads).
std::string byte_tokenizer_text(const std::vector<std::string>& symbols);
// Writes it to PATH atomically; rotor::Error (naming PATH) on a bad symbol
// or a failed write.
void write_byte_tokenizer(const std::string& path, const std::vector<std::string>& symbols);

struct SpmTrainOptions {
  std::vector<std::string> inputs;  // one joint model over all of them
  std::string model_prefix;         // writes PREFIX.model and PREFIX.vocab
  int32_t vocab_size = 8000;
  std::string model_type = "bpe";   // bpe | unigram
  double character_coverage = 1.0;  // 0.9995 for languages with large alphabets
  // Sentences sampled (after shuffling) from the inputs; 0 = use every one.
  int64_t input_sentence_size = 0;
  std::vector<std::string> user_defined_symbols;  // ids 4, 5, ... in order
  int32_t num_threads = 0;                        // 0 = hardware threads
  bool verbose = false;                           // SentencePiece's own log
};

// Trains a model; throws rotor::Error (one line) on bad options or inputs.
void train_sentencepiece(const SpmTrainOptions& options);

// "[MASK],[CLS]" -> {"[MASK]", "[CLS]"} (empty items dropped, spaces trimmed).
std::vector<std::string> split_symbol_list(std::string_view list);

}  // namespace rotor::data
