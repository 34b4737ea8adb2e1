#include "data/prepared.h"

#include <filesystem>

#include "core/error.h"
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

// A prepared copy is current when it is newer than every file it came from.
bool newer_than(const std::string& made, const std::vector<std::string>& sources) {
  std::error_code ec;
  const auto t = fs::last_write_time(made, ec);
  if (ec) return false;
  for (const auto& s : sources)
    if (fs::last_write_time(s, ec) > t || ec) return false;
  return true;
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

std::string ensure_prepared(const CorpusSource& s, const std::string& spm,
                            const std::string& out_prefix, const CleanOptions& clean) {
  if (s.is_prepared()) return s.path;
  s.check_exists();
  const std::vector<std::string> raw = s.raw_files();
  std::vector<std::string> inputs = raw;
  inputs.push_back(spm);
  const std::vector<std::string> made = index_files(s, out_prefix);
  if (all_exist(made) && newer_than(made.back(), inputs)) return out_prefix;
  fs::create_directories(fs::path(out_prefix).parent_path());
  PrepareOptions o;
  o.spm_model = spm;
  o.src = raw[0];
  if (s.parallel()) o.tgt = raw[1];
  o.output_prefix = out_prefix;
  o.max_len = clean.max_len;
  o.max_len_ratio = clean.max_len_ratio;
  o.min_len = 1;
  const PrepareStats stats = prepare_corpus(o);
  log().info("binarized {} -> {}: {}", s.path, out_prefix, stats.summary());
  if (stats.dropped_long > 0 && !clean.max_len_key.empty())
    log().warn("{}: dropped {} sentence pairs of more than {} = {} tokens", s.key,
               stats.dropped_long, clean.max_len_key, clean.max_len);
  return out_prefix;
}

void ensure_tokenizer(const std::string& spm_path, const CorpusSource& train, SpmTrainOptions o) {
  if (fs::exists(spm_path)) return;
  const std::vector<std::string> raw = train.raw_files();
  if (train.path.empty() || train.is_prepared() || !all_exist(raw))
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
  train_sentencepiece(o);
}

}  // namespace rotor::data
