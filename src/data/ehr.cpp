#include "data/ehr.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"

namespace fs = std::filesystem;

namespace rotor::data {

EhrMeta EhrMeta::load(const std::string& dir) {
  const std::string path = dir + "/ehr.json";
  if (!fs::exists(path))
    ROTOR_FAIL("{}: missing: {} is not a complete rotor prepare-ehr output", path, dir);
  const json_io::Json j = json_io::load(path);
  if (json_io::get_string(j, "format", path) != "rotor-ehr-1")
    ROTOR_FAIL("{}: format is not rotor-ehr-1", path);
  EhrMeta m;
  m.vocab_size = json_io::get_int(j, "vocab_size", path);
  m.age_vocab_size = json_io::get_int(j, "age_vocab_size", path);
  m.age_unit = json_io::get_string(j, "age_unit", path);
  m.age_bin = json_io::get_int(j, "age_bin", path);
  m.labels = json_io::get_string(j, "labels", path);
  const json_io::Json& splits = json_io::at(j, "examples", path);
  m.train = json_io::get_int(splits, "train", path);
  m.valid = json_io::get_int(splits, "valid", path);
  m.test = json_io::get_int(splits, "test", path);
  if (m.vocab_size <= kEhrFirstCode || m.age_vocab_size <= 0 || m.age_bin <= 0)
    ROTOR_FAIL("{}: vocab_size {}, age_vocab_size {} or age_bin {} out of range", path,
               m.vocab_size, m.age_vocab_size, m.age_bin);
  return m;
}

std::optional<Fingerprint> ehr_fingerprint(const std::string& dir) {
  const std::string path = dir + "/ehr.json";
  if (!fs::exists(path))
    ROTOR_FAIL("{}: missing: {} is not a complete rotor prepare-ehr output", path, dir);
  const json_io::Json j = json_io::load(path);
  if (!j.is_object() || !j.contains("fingerprint")) return std::nullopt;
  Fingerprint f = Fingerprint::from_json(j.at("fingerprint"), path + " (fingerprint)");
  f.file("vocab.txt", dir + "/vocab.txt");
  return f;
}

std::string ehr_dir_of(const std::string& prefix) {
  const fs::path parent = fs::path(prefix).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

bool is_ehr_split(const std::string& prefix) {
  return !prefix.empty() && fs::exists(ehr_dir_of(prefix) + "/ehr.json");
}

EhrSplit EhrSplit::open(const std::string& prefix) {
  EhrSplit s;
  s.prefix_ = prefix;
  s.meta_ = EhrMeta::load(ehr_dir_of(prefix));
  s.tokens_ = std::make_shared<const MmapCorpus>(MmapCorpus::open(prefix));
  const MmapCorpus& c = *s.tokens_;
  for (size_t i = 0; i < c.size(); ++i) {
    auto t = c.sentence(i);
    if (t.size() % kEhrChannels != 0)
      ROTOR_FAIL("{}.bin: example {} has {} values, not 3 per token", prefix, i, t.size());
    for (size_t k = 0; k < t.size(); k += kEhrChannels) {
      if (t[k] < 0 || t[k] >= s.meta_.vocab_size)
        ROTOR_FAIL("{}.bin: example {} token {}: code id {} outside the vocabulary of {}", prefix,
                   i, k / 3, t[k], s.meta_.vocab_size);
      if (t[k + 1] < 0 || t[k + 1] >= s.meta_.age_vocab_size)
        ROTOR_FAIL("{}.bin: example {} token {}: age id {} outside [0, {})", prefix, i, k / 3,
                   t[k + 1], s.meta_.age_vocab_size);
      if (t[k + 2] < 0) ROTOR_FAIL("{}.bin: example {}: negative visit index", prefix, i);
    }
  }
  if (!s.meta_.labels.empty()) {
    s.labels_ = std::make_shared<const MmapCorpus>(MmapCorpus::open(prefix + ".labels"));
    if (s.labels_->size() != c.size())
      ROTOR_FAIL("{}.labels.idx: {} label sets for {} examples", prefix, s.labels_->size(),
                 c.size());
  }
  return s;
}

std::span<const int32_t> EhrSplit::labels(size_t i) const {
  if (!labels_) return {};
  return labels_->sentence(i);
}

int64_t ehr_sequence_length(std::span<const int32_t> tokens, int64_t max_len) {
  ROTOR_CHECK(max_len >= 2, "an EHR sequence needs max_len >= 2, got {}", max_len);
  if (tokens.size() % kEhrChannels != 0)
    ROTOR_FAIL("EHR example of {} values: not 3 per token", tokens.size());
  const int64_t n = static_cast<int64_t>(tokens.size()) / kEhrChannels;
  if (n == 0) ROTOR_FAIL("EHR example without tokens");
  return 1 + std::min<int64_t>(n, max_len - 1);  // [CLS] and the newest tokens
}

EhrSequence build_ehr_sequence(std::span<const int32_t> tokens, int64_t max_len) {
  const int64_t n = static_cast<int64_t>(tokens.size()) / kEhrChannels;
  const int64_t keep = ehr_sequence_length(tokens, max_len) - 1, first = n - keep;
  const int32_t first_visit = tokens[static_cast<size_t>(first * kEhrChannels + 2)];
  EhrSequence s;
  auto put = [&](int32_t code, int32_t age, int32_t visit) {
    s.codes.push_back(code);
    s.ages.push_back(age);
    s.segments.push_back(visit % 2);
    s.positions.push_back(visit);
  };
  put(kEhrCls, tokens[static_cast<size_t>(first * kEhrChannels + 1)], 0);
  for (int64_t t = first; t < n; ++t) {
    const size_t k = static_cast<size_t>(t * kEhrChannels);
    const int32_t visit = tokens[k + 2] - first_visit;
    if (visit < 0) ROTOR_FAIL("EHR example: visit indices decrease at token {}", t);
    put(tokens[k], tokens[k + 1], visit);
  }
  return s;
}

std::vector<std::string> read_ehr_vocab(const std::string& dir) {
  const std::string path = dir + "/vocab.txt";
  const std::string text = read_file(path);
  std::vector<std::string> tokens;
  size_t line = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string row = text.substr(at, end - at);
    ++line;
    const size_t tab = row.find('\t');
    if (tab == 0 || tab == std::string::npos)
      ROTOR_FAIL("{}:{}: expected TOKEN<TAB>COUNT", path, line);
    tokens.push_back(row.substr(0, tab));
    at = end + 1;
  }
  if (static_cast<int64_t>(tokens.size()) <= kEhrFirstCode)
    ROTOR_FAIL("{}: {} lines, no code after the {} specials", path, tokens.size(), kEhrFirstCode);
  return tokens;
}

std::vector<std::string> ehr_label_names(const std::string& dir) {
  std::vector<std::string> v = read_ehr_vocab(dir);
  v.erase(v.begin(), v.begin() + kEhrFirstCode);
  return v;
}

ClassificationSet ehr_multilabel_set(const EhrSplit& split, int64_t max_len, bool require_labels) {
  if (!split.has_labels() && require_labels)
    ROTOR_FAIL("{}: no labels (prepare-ehr ran without --labels next_visit|window:MONTHS)",
               split.prefix());
  ClassificationSet set;
  set.path = split.prefix();
  set.multilabel = true;
  set.has_labels = split.has_labels();
  set.num_labels = split.meta().vocab_size - kEhrFirstCode;
  set.examples.reserve(split.size());
  for (size_t i = 0; i < split.size(); ++i) {
    EhrSequence s = build_ehr_sequence(split.tokens(i), max_len);
    ClassificationExample ex;
    set.truncated += static_cast<int64_t>(split.tokens(i).size() / kEhrChannels) + 1 >
                     static_cast<int64_t>(s.size());
    ex.ids = std::move(s.codes);
    ex.types = std::move(s.segments);
    ex.ages = std::move(s.ages);
    ex.positions = std::move(s.positions);
    for (int32_t id : split.labels(i)) {
      if (id < kEhrFirstCode || id >= split.meta().vocab_size)
        ROTOR_FAIL("{}.labels.bin: example {}: label id {} is not a code (ids {} to {})",
                   split.prefix(), i, id, kEhrFirstCode, split.meta().vocab_size - 1);
      ex.label_set.push_back(id - kEhrFirstCode);
    }
    std::sort(ex.label_set.begin(), ex.label_set.end());
    ex.label_set.erase(std::unique(ex.label_set.begin(), ex.label_set.end()), ex.label_set.end());
    set.examples.push_back(std::move(ex));
  }
  return set;
}

}  // namespace rotor::data
