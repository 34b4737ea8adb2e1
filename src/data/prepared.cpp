#include "data/prepared.h"

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/hash.h"
#include "core/io.h"
#include "core/logging.h"
#include "data/prepare.h"

namespace fs = std::filesystem;

namespace rotor::data {

namespace {

// The index files whose presence marks a prepared prefix.
std::vector<std::string> index_files(const CorpusSource& s, const std::string& prefix) {
  if (s.parallel()) return {prefix + ".src.idx", prefix + ".tgt.idx"};
  return {prefix + ".idx"};
}

bool all_exist(const std::vector<std::string>& files) {
  for (const auto& f : files)
    if (!fs::exists(f)) return false;
  return true;
}

std::string describe(const CorpusSource& s) {
  const std::vector<std::string> raw = s.raw_files();
  return fmt::format("found neither prepared data ({}) nor raw text ({})",
                     index_files(s, s.path).front(), fmt::join(raw, " and "));
}

// The names of the raw files in fingerprints and messages: "data.train.en"
// for a language of a parallel corpus, "data.train" for a monolingual one.
std::vector<std::string> raw_names(const CorpusSource& s) {
  if (s.parallel()) return {s.key + "." + s.src_lang, s.key + "." + s.tgt_lang};
  return {s.key};
}

void remove_file(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) ROTOR_FAIL("cannot remove {}: {}", path, ec.message());
}

}  // namespace

bool CorpusSource::is_prepared() const {
  return !path.empty() && all_exist(index_files(*this, path));
}

std::vector<std::string> CorpusSource::raw_files() const {
  if (parallel()) return {path + "." + src_lang, path + "." + tgt_lang};
  return {path};
}

void CorpusSource::check_exists() const {
  if (is_prepared()) return;
  std::error_code ec;
  if (!path.empty() && fs::is_directory(path, ec)) {
    if (parallel())
      ROTOR_FAIL(
          "{}: {} is a directory; name the prefix of the files in it ({}/train for {}/train.{} "
          "and {}/train.{})",
          key, path, path, path, src_lang, path, tgt_lang);
    ROTOR_FAIL("{}: {} is a directory; name a text file (or a prefix made by rotor prepare)", key,
               path);
  }
  for (const auto& f : raw_files())
    if (!fs::is_regular_file(f)) ROTOR_FAIL("{}: {}", key, describe(*this));
}

std::vector<std::string> prepared_files(const CorpusSource& s, const std::string& prefix) {
  return index_files(s, prefix);
}

Fingerprint data_fingerprint(const CorpusSource& s, const std::string& spm,
                             const CleanOptions& clean) {
  Fingerprint f("rotor train");
  f.setting("data.src_lang", s.src_lang).setting("data.tgt_lang", s.tgt_lang);
  f.setting("data.max_len", clean.max_len).setting("data.max_len_ratio", clean.max_len_ratio);
  f.setting("min_len", 1).setting("append_eos", false);
  // Recorded only when set, so that the corpora of earlier runs stay valid.
  if (clean.keep_line_ends) f.setting("keep_line_ends", true);
  f.file("tokenizer", spm);
  const std::vector<std::string> raw = s.raw_files(), names = raw_names(s);
  for (size_t i = 0; i < raw.size(); ++i) f.file(names[i], raw[i]);
  return f;
}

Fingerprint tokenizer_fingerprint(const CorpusSource& train, const SpmTrainOptions& o) {
  Fingerprint f("rotor train");
  f.setting("data.vocab_size", o.vocab_size)
      .setting("data.spm_model_type", o.model_type)
      .setting("data.character_coverage", o.character_coverage)
      .setting("input_sentence_size", o.input_sentence_size)
      .setting("user_defined_symbols", o.user_defined_symbols);
  const std::vector<std::string> raw = train.raw_files(), names = raw_names(train);
  for (size_t i = 0; i < raw.size(); ++i) f.file(names[i], raw[i]);
  return f;
}

void check_prepared_tokenizer(const CorpusSource& s, const std::string& spm) {
  const std::string path = fingerprint_path(s.path);
  const std::optional<Fingerprint> f = Fingerprint::load(path);
  if (!f) return;
  const std::string recorded = f->file_hash("tokenizer");
  if (recorded.empty()) ROTOR_FAIL("{}: records no tokenizer", path);
  const std::string now = hex64(hash_file(spm));
  if (recorded != now)
    ROTOR_FAIL("{}: {} was prepared with the tokenizer {} (hash {}), the run uses {} (hash {})",
               s.key, s.path, f->file_path("tokenizer"), recorded, spm, now);
}

void check_prepared_line_ends(const CorpusSource& s) {
  const std::optional<Fingerprint> f = Fingerprint::load(fingerprint_path(s.path));
  if (!f) return;  // made by other tools: taken as it is
  const json_io::Json settings = f->to_json()["settings"];
  for (const char* key : {"--keep-line-ends", "keep_line_ends"})
    if (settings.contains(key) && settings[key] == true) return;
  ROTOR_FAIL(
      "{}: {} was prepared without its line breaks, and a byte language model reads the text "
      "with them (rotor prepare --keep-line-ends, or name the raw text)",
      s.key, s.path);
}

std::string ensure_prepared(const CorpusSource& s, const std::string& spm,
                            const std::string& out_prefix, const CleanOptions& clean) {
  if (s.is_prepared()) {
    check_prepared_tokenizer(s, spm);
    if (clean.keep_line_ends) check_prepared_line_ends(s);
    return s.path;
  }
  s.check_exists();
  const std::vector<std::string> raw = s.raw_files();
  const Fingerprint now = data_fingerprint(s, spm, clean);
  const std::string fp = fingerprint_path(out_prefix);
  if (all_exist(index_files(s, out_prefix))) {
    const std::string why = stale_reason(fp, now);
    if (why.empty()) return out_prefix;
    log().warn("{}: binarizing {} again: {}", out_prefix, s.key, why);
  }
  fs::create_directories(fs::path(out_prefix).parent_path());
  PrepareOptions o;
  // While the files change, nothing vouches for them (a failure before that
  // keeps the earlier corpus and its fingerprint).
  o.before_commit = [&] { remove_file(fp); };
  o.spm_model = spm;
  o.src = raw[0];
  if (s.parallel()) o.tgt = raw[1];
  o.output_prefix = out_prefix;
  o.max_len = clean.max_len;
  o.max_len_ratio = clean.max_len_ratio;
  o.min_len = 1;
  o.keep_line_ends = clean.keep_line_ends;
  const PrepareStats stats = prepare_corpus(o);
  now.save(fp);
  log().info("binarized {} -> {}: {}", s.path, out_prefix, stats.summary());
  if (stats.dropped_long > 0 && !clean.max_len_key.empty())
    log().warn("{}: dropped {} sentence pairs of more than {} = {} tokens", s.key,
               stats.dropped_long, clean.max_len_key, clean.max_len);
  return out_prefix;
}

void ensure_byte_tokenizer(const std::string& path, const std::vector<std::string>& symbols) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && read_file(path) == byte_tokenizer_text(symbols)) return;
  if (!fs::path(path).parent_path().empty()) fs::create_directories(fs::path(path).parent_path());
  write_byte_tokenizer(path, symbols);
  log().info("byte tokenizer {}: {} ids (UTF-8 bytes{})", path, 260 + symbols.size(),
             symbols.empty() ? std::string() : fmt::format(", with {}", fmt::join(symbols, " ")));
}

void ensure_tokenizer(const std::string& spm_path, const CorpusSource& train, SpmTrainOptions o,
                      bool owned) {
  const std::vector<std::string> raw = train.raw_files();
  const bool raw_text = !train.path.empty() && !train.is_prepared() && all_exist(raw);
  const std::string fp = fingerprint_path(spm_path);
  std::optional<Fingerprint> now;
  if (fs::exists(spm_path)) {
    // A tokenizer the user names, or one that no raw text could remake, is
    // used as it is.
    if (!owned || !raw_text) return;
    now = tokenizer_fingerprint(train, o);
    const std::string why = stale_reason(fp, *now);
    if (why.empty()) return;
    log().warn("{}: training the tokenizer again: {}", spm_path, why);
  }
  if (!raw_text)
    ROTOR_FAIL(
        "tokenizer {} not found (data.spm_model); it can only be trained from the raw text "
        "of {}",
        spm_path, train.key);
  if (!fs::path(spm_path).parent_path().empty())
    fs::create_directories(fs::path(spm_path).parent_path());
  o.inputs = raw;
  const std::string suffix = ".model";
  o.model_prefix =
      spm_path.size() > suffix.size() &&
              spm_path.compare(spm_path.size() - suffix.size(), suffix.size(), suffix) == 0
          ? spm_path.substr(0, spm_path.size() - suffix.size())
          : spm_path;
  log().info("training a {} SentencePiece model ({} pieces{}) on {}", o.model_type, o.vocab_size,
             o.user_defined_symbols.empty()
                 ? std::string()
                 : fmt::format(", with {}", fmt::join(o.user_defined_symbols, " ")),
             fmt::join(raw, " and "));
  if (!now) now = tokenizer_fingerprint(train, o);
  remove_file(fp);
  train_sentencepiece(o);
  now->save(fp);
}

}  // namespace rotor::data
