#include "data/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/io.h"
#include "data/prepare.h"

namespace rotor::data {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// SentencePiece's message without its source location and failed condition:
// "./src/trainer_interface.cc(660) [(a) == (b)] Vocabulary size too high (9)."
// -> "Vocabulary size too high (9)."
std::string library_text(const sentencepiece::util::Status& status) {
  std::string m = status.message() ? status.message() : "";
  const size_t cc = m.find(".cc(");
  if (cc != std::string::npos && m.find(' ') > cc) {
    const size_t cond = m.find("] ", cc);
    const size_t loc_end = m.find(") ", cc);
    if (cond != std::string::npos)
      m = m.substr(cond + 2);
    else
      m = loc_end != std::string::npos ? m.substr(loc_end + 2) : std::string();
  }
  while (!m.empty() && (m.back() == ' ' || m.back() == '\n')) m.pop_back();
  return m;
}

// The condition SentencePiece checked, in its option names: "[trainer_spec.
// character_coverage() >= 0.98]" -> "character_coverage >= 0.98"; "" if none.
std::string library_condition(const sentencepiece::util::Status& status) {
  const std::string m = status.message() ? status.message() : "";
  const size_t open = m.find(") [");
  const size_t close = m.rfind("] ");
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  std::string cond = m.substr(open + 3, close - open - 3);
  for (const std::string noise : {"trainer_spec_.", "trainer_spec.", "()"})
    for (size_t p = cond.find(noise); p != std::string::npos; p = cond.find(noise, p))
      cond.erase(p, noise.size());
  return cond;
}

// The number after `marker` in `text`, or -1.
long long number_after(const std::string& text, const std::string& marker) {
  const size_t p = text.find(marker);
  if (p == std::string::npos) return -1;
  return std::strtoll(text.c_str() + p + marker.size(), nullptr, 10);
}

// A failed training in rotor's words, naming the inputs.
std::string training_failure(const sentencepiece::util::Status& status, const SpmTrainOptions& o) {
  const std::string m = library_text(status);
  const std::string inputs = join(o.inputs, ", ");
  const long long most = number_after(m, "set it to a value <= ");
  if (m.find("Vocabulary size too high") != std::string::npos && most > 0)
    return fmt::format(
        "spm-train: vocabulary size {} is too large for the text of {}: it yields at most {} "
        "pieces; use {} or less",
        o.vocab_size, inputs, most, most);
  const long long chars = number_after(m, "required_chars. ");
  if (m.find("smaller than required_chars") != std::string::npos && chars >= 0)
    return fmt::format(
        "spm-train: vocabulary size {} is too small for the text of {}: its characters need "
        "more pieces (raise the vocabulary size or lower the character coverage)",
        o.vocab_size, inputs);
  const std::string raw = status.message() ? status.message() : "";
  if (raw.find("!sentences_.empty()") != std::string::npos)
    return fmt::format("spm-train: no text to learn from in {} (every line is empty)", inputs);
  const std::string cond = library_condition(status);
  if (m.empty() && !cond.empty())
    return fmt::format("spm-train: SentencePiece cannot train on {}: it requires {}", inputs, cond);
  return fmt::format("spm-train: SentencePiece cannot train on {}: {}", inputs,
                     m.empty() ? std::string("it gave no reason") : m);
}

// Every line of `path` must be UTF-8 (as `rotor prepare` requires of the same text).
void check_utf8_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ROTOR_FAIL("spm-train: input {}: cannot open", path);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    const size_t bad = find_invalid_utf8(line);
    if (bad != std::string::npos)
      ROTOR_FAIL("spm-train: {}:{}: invalid UTF-8 at byte {} of the line", path, n, bad + 1);
  }
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

TokenizerKind Tokenizer::kind_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return is_bytes_text(head) ? TokenizerKind::Bytes : TokenizerKind::SentencePiece;
}

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) ROTOR_FAIL("tokenizer {}: no such file", path);
  if (kind_of_file(path) == TokenizerKind::Bytes) return load_bytes(path, read_file(path));
  Tokenizer t;
  t.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = t.sp_->Load(path);
  if (!status.ok()) {
    const std::string why = library_text(status);
    ROTOR_FAIL(
        "tokenizer {}: cannot load it, not a valid model (neither SentencePiece nor a byte "
        "tokenizer){}",
        path, why.empty() ? std::string() : " (" + why + ")");
  }
  t.path_ = path;
  t.loaded_ = true;
  // The whole framework relies on the fixed reserved ids (see the header).
  const auto& sp = *t.sp_;
  if (sp.pad_id() != kPadId || sp.unk_id() != kUnkId || sp.bos_id() != kBosId ||
      sp.eos_id() != kEosId)
    ROTOR_FAIL(
        "SentencePiece model {}: reserved ids pad={} unk={} bos={} eos={}, rotor needs "
        "pad=0 unk=1 bos=2 eos=3 (train it with `rotor spm-train`)",
        path, sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id());
  return t;
}

void Tokenizer::require_loaded() const {
  ROTOR_CHECK(loaded_, "tokenizer used before load()");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  require_loaded();
  if (is_bytes()) return encode_bytes(text);
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  if (!status.ok()) ROTOR_FAIL("SentencePiece encode failed: {}", status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<std::string> Tokenizer::encode_pieces(std::string_view text) const {
  require_loaded();
  if (is_bytes()) {
    std::vector<std::string> pieces;
    for (int32_t id : encode_bytes(text)) pieces.push_back(bytes_piece(id));
    return pieces;
  }
  std::vector<std::string> pieces;
  auto status = sp_->Encode(text, &pieces);
  if (!status.ok()) ROTOR_FAIL("SentencePiece encode failed: {}", status.ToString());
  return pieces;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  require_loaded();
  if (is_bytes()) return decode_bytes(ids);
  const int n = sp_->GetPieceSize();
  std::vector<int> v;
  v.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= n) ROTOR_FAIL("decode: token id {} out of range [0, {})", id, n);
    v.push_back(id);
  }
  std::string text;
  auto status = sp_->Decode(v, &text);
  if (!status.ok()) ROTOR_FAIL("SentencePiece decode failed: {}", status.ToString());
  return text;
}

int32_t Tokenizer::vocab_size() const {
  require_loaded();
  if (is_bytes()) return 4 + static_cast<int32_t>(symbols_.size()) + 256;
  return sp_->GetPieceSize();
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    ROTOR_FAIL("token id {} out of range [0, {})", id, vocab_size());
  if (is_bytes()) return bytes_piece(id);
  return sp_->IdToPiece(id);
}

int32_t Tokenizer::piece_to_id(std::string_view piece) const {
  require_loaded();
  if (is_bytes()) return bytes_piece_id(piece);
  return sp_->PieceToId(piece);
}

bool Tokenizer::is_unknown(int32_t id) const {
  require_loaded();
  if (is_bytes()) return id == kUnkId;
  return sp_->IsUnknown(id);
}

std::vector<std::string> split_symbol_list(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

void train_sentencepiece(const SpmTrainOptions& o) {
  namespace fs = std::filesystem;
  if (o.inputs.empty()) ROTOR_FAIL("spm-train: no input file given");
  for (const auto& in : o.inputs) {
    std::error_code ec;
    if (!fs::is_regular_file(in, ec)) ROTOR_FAIL("spm-train: input {}: no such file", in);
    if (fs::file_size(in, ec) == 0) ROTOR_FAIL("spm-train: input {} is empty", in);
  }
  if (o.model_prefix.empty()) ROTOR_FAIL("spm-train: --model-prefix is empty");
  fs::path parent = fs::path(o.model_prefix).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    ROTOR_FAIL("spm-train: directory {} of model prefix {} does not exist", parent.string(),
               o.model_prefix);
  if (o.model_type != "bpe" && o.model_type != "unigram")
    ROTOR_FAIL("spm-train: model type '{}' is not bpe or unigram", o.model_type);
  const int32_t reserved = 4 + static_cast<int32_t>(o.user_defined_symbols.size());
  if (o.vocab_size <= reserved)
    ROTOR_FAIL("spm-train: vocab size {} must exceed the {} reserved and user-defined symbols",
               o.vocab_size, reserved);
  if (!(o.character_coverage > 0.0 && o.character_coverage <= 1.0))
    ROTOR_FAIL("spm-train: character coverage {} is not in (0, 1]", o.character_coverage);
  if (o.input_sentence_size < 0)
    ROTOR_FAIL("spm-train: input sentence size {} is negative", o.input_sentence_size);
  for (const auto& s : o.user_defined_symbols)
    if (s == "<pad>" || s == "<unk>" || s == "<s>" || s == "</s>")
      ROTOR_FAIL("spm-train: user-defined symbol {} is already reserved", s);
  for (const auto& in : o.inputs) check_utf8_file(in);

  int threads = o.num_threads > 0
                    ? o.num_threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // SentencePiece writes PREFIX.model and PREFIX.vocab in place; a run killed
  // (or a disk filling up) meanwhile would leave a torn model that every later
  // run loads. It writes under a temporary prefix instead, and the files are
  // renamed into place when both are complete: the vocabulary first, the
  // model (whose presence means "trained") last.
  const std::string tmp_prefix = o.model_prefix + ".tmp-" + std::to_string(::getpid());
  struct RemoveTemps {
    std::string prefix;
    ~RemoveTemps() {
      std::error_code ec;
      fs::remove(prefix + ".model", ec);
      fs::remove(prefix + ".vocab", ec);
    }
  } cleanup{tmp_prefix};
  std::unordered_map<std::string, std::string> args = {
      {"input", join(o.inputs, ",")},
      {"model_prefix", tmp_prefix},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", fmt::format("{}", o.character_coverage)},
      {"input_sentence_size", std::to_string(o.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      {"pad_piece", "<pad>"},
      {"unk_piece", "<unk>"},
      {"bos_piece", "<s>"},
      {"eos_piece", "</s>"},
      // Long lines (wikitext paragraphs) are kept rather than silently skipped.
      {"max_sentence_length", "65536"},
      // 0 = INFO (SentencePiece's progress), 2 = errors only.
      {"minloglevel", o.verbose ? "0" : "2"},
  };
  if (!o.user_defined_symbols.empty())
    args["user_defined_symbols"] = join(o.user_defined_symbols, ",");
  auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) throw Error(training_failure(status, o));
  // SentencePiece does not check its own writes: a model cut short by a full
  // disk or `ulimit -f` would be reported as trained. Read it back.
  if (!sentencepiece::SentencePieceProcessor().Load(tmp_prefix + ".model").ok())
    ROTOR_FAIL(
        "spm-train: cannot write {}.model: SentencePiece wrote an incomplete model (is "
        "the disk full or a file size limit, ulimit -f, reached?)",
        o.model_prefix);
  for (const char* ext : {".vocab", ".model"}) {
    const std::string from = tmp_prefix + ext, to = o.model_prefix + ext;
    // SentencePiece closes its files without syncing them; a rename is only
    // as durable as the data behind it.
    fsync_file(from);
    // A link is followed; a FIFO or a device is written into, not replaced.
    move_into_place(from, to);
  }
  fsync_directory(parent.empty() ? std::string(".") : parent.string());
}

}  // namespace rotor::data
