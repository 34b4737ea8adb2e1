#include "data/classification.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/io.h"
#include "core/philox.h"

namespace rotor::data {

PairSpecialIds PairSpecialIds::from_tokenizer(const Tokenizer& tok) {
  PairSpecialIds s;
  auto need = [&](const char* piece) {
    const int32_t id = tok.piece_to_id(piece);
    if (id == tok.unk_id() || id < 0)
      ROTOR_FAIL(
          "tokenizer {} has no {} symbol: classification packs [CLS] a [SEP] b [SEP] "
          "(train it with rotor spm-train --user-defined-symbols \"[MASK],[CLS],[SEP]\")",
          tok.path(), piece);
    return id;
  };
  s.cls = need("[CLS]");
  s.sep = need("[SEP]");
  return s;
}

void pack_example(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool pair,
                  int64_t max_len, const PairSpecialIds& special, std::vector<int32_t>& ids,
                  std::vector<int32_t>& types) {
  const int64_t specials = pair ? 3 : 2;
  ROTOR_CHECK(max_len >= specials, "max_len {} cannot hold the special tokens", max_len);
  int64_t la = static_cast<int64_t>(a.size()), lb = pair ? static_cast<int64_t>(b.size()) : 0;
  // longest_first: one token at a time from the longer side (b on a tie).
  while (la + lb + specials > max_len) {
    if (la > lb)
      --la;
    else
      --lb;
  }
  ids.clear();
  types.clear();
  ids.push_back(special.cls);
  ids.insert(ids.end(), a.begin(), a.begin() + la);
  ids.push_back(special.sep);
  types.assign(ids.size(), 0);
  if (pair) {
    ids.insert(ids.end(), b.begin(), b.begin() + lb);
    ids.push_back(special.sep);
    types.resize(ids.size(), 1);
  }
}

namespace {

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i)
    if (i == line.size() || line[i] == '\t') {
      out.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

// The lines of `text` ("\n" or "\r\n" ends), the last one without an end included.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines.push_back(l);
    start = end + 1;
  }
  return lines;
}

// The index of column `name`: found in the header, or a 0-based index when
// there is none. -1 when absent.
int64_t column_index(const std::vector<std::string_view>& header, bool has_header,
                     const std::string& name) {
  if (has_header) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int64_t>(i);
    return -1;
  }
  int64_t i = -1;
  auto r = std::from_chars(name.data(), name.data() + name.size(), i);
  if (r.ec != std::errc() || r.ptr != name.data() + name.size() || i < 0) return -1;
  return i;
}

std::string header_list(const std::vector<std::string_view>& header) {
  std::string s;
  for (const auto& h : header) s += (s.empty() ? "" : ", ") + std::string(h);
  return s;
}

// Encodes texts[i] into out[i] on up to two threads per core.
void encode_all(const Tokenizer& tok, const std::vector<std::string_view>& texts,
                std::vector<std::vector<int32_t>>& out) {
  out.assign(texts.size(), {});
  const size_t n = texts.size();
  const size_t threads = std::max<size_t>(
      1, std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n / 256 + 1));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t * n / threads; i < (t + 1) * n / threads; ++i)
        out[i] = tok.encode(texts[i]);
    });
  for (auto& th : pool) th.join();
}

}  // namespace

ClassificationSet read_classification_tsv(const std::string& path, const TsvFormat& f,
                                          const Tokenizer& tok, bool require_labels) {
  const std::string text = read_file(path, kMaxTsvBytes);
  const std::vector<std::string_view> lines = split_lines(text);
  ClassificationSet set;
  set.path = path;
  if (lines.empty() || (f.header && lines.size() == 1))
    ROTOR_FAIL("{}: no examples{}", path, f.header ? " after the header" : "");
  const std::vector<std::string_view> header =
      f.header ? split_tabs(lines[0]) : std::vector<std::string_view>{};
  auto column = [&](const std::string& name, const char* key) {
    const int64_t i = column_index(header, f.header, name);
    if (i < 0 && f.header && key)
      ROTOR_FAIL("{}:1: no column \"{}\" ({}); the header has: {}", path, name, key,
                 header_list(header));
    if (i < 0 && key)
      ROTOR_FAIL("{}: {} \"{}\" is not a column index (data.header is false)", path, key, name);
    return i;
  };
  const bool pair = !f.sentence2.empty();
  const int64_t c1 = column(f.sentence1, "data.sentence1_column");
  const int64_t c2 = pair ? column(f.sentence2, "data.sentence2_column") : -1;
  const int64_t cl = column_index(header, f.header, f.label);
  if (cl < 0 && f.header && require_labels) column(f.label, "data.label_column");
  const size_t first = f.header ? 1 : 0;
  set.has_labels = cl >= 0;
  if (!f.header && set.has_labels) {
    // Without a header, a file whose first example has no label field (a
    // test set) has no labels.
    size_t i = first;
    while (i < lines.size() && lines[i].empty()) ++i;
    if (i < lines.size() && static_cast<int64_t>(split_tabs(lines[i]).size()) <= cl)
      set.has_labels = false;
  }
  if (require_labels && !set.has_labels)
    ROTOR_FAIL("{}: no label column {} (data.label_column)", path, f.label);
  const int64_t needed = std::max({c1, c2, set.has_labels ? cl : -1}) + 1;

  std::vector<std::string_view> s1, s2;
  for (size_t i = first; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // blank lines hold no example
    const std::vector<std::string_view> fields = split_tabs(lines[i]);
    if (static_cast<int64_t>(fields.size()) < needed)
      ROTOR_FAIL("{}:{}: {} tab-separated fields, but column {} is needed{}", path, i + 1,
                 fields.size(), needed - 1,
                 f.header ? fmt::format(" (the header has {})", header.size()) : "");
    ClassificationExample ex;
    if (set.has_labels) {
      const std::string_view label = fields[static_cast<size_t>(cl)];
      if (f.regression) {
        double v = 0;
        const auto r = std::from_chars(label.data(), label.data() + label.size(), v);
        if (r.ec != std::errc() || r.ptr != label.data() + label.size() || !std::isfinite(v))
          ROTOR_FAIL("{}:{}: label \"{}\" is not a number (data.regression is true)", path, i + 1,
                     label);
        ex.target = static_cast<float>(v);
      } else {
        const auto it = std::find(f.labels.begin(), f.labels.end(), label);
        if (it == f.labels.end()) {
          std::string known;
          for (const auto& l : f.labels) known += (known.empty() ? "" : ", ") + l;
          ROTOR_FAIL("{}:{}: label \"{}\" is not one of data.labels [{}]", path, i + 1, label,
                     known);
        }
        ex.label = static_cast<int32_t>(it - f.labels.begin());
      }
    }
    set.examples.push_back(std::move(ex));
    s1.push_back(fields[static_cast<size_t>(c1)]);
    if (pair) s2.push_back(fields[static_cast<size_t>(c2)]);
  }
  if (set.examples.empty()) ROTOR_FAIL("{}: no examples", path);

  std::vector<std::vector<int32_t>> a, b;
  encode_all(tok, s1, a);
  if (pair) encode_all(tok, s2, b);
  const PairSpecialIds special = PairSpecialIds::from_tokenizer(tok);
  const int64_t specials = pair ? 3 : 2;
  for (size_t i = 0; i < set.examples.size(); ++i) {
    static const std::vector<int32_t> kNone;
    const std::vector<int32_t>& bi = pair ? b[i] : kNone;
    if (static_cast<int64_t>(a[i].size() + bi.size()) + specials > f.max_len) ++set.truncated;
    pack_example(a[i], bi, pair, f.max_len, special, set.examples[i].ids, set.examples[i].types);
  }
  return set;
}

ClassificationHostBatch make_classification_batch(const ClassificationSet& set,
                                                  const std::vector<int64_t>& indices,
                                                  bool regression) {
  const int64_t B = static_cast<int64_t>(indices.size());
  ROTOR_CHECK(B > 0, "an empty classification batch");
  int64_t T = 0;
  for (int64_t i : indices)
    T = std::max<int64_t>(T, static_cast<int64_t>(set.examples[i].ids.size()));
  std::vector<int32_t> ids(static_cast<size_t>(B * T), kPadId), types(ids.size(), 0);
  std::vector<int32_t> lengths(static_cast<size_t>(B)), labels;
  std::vector<float> targets;
  ClassificationHostBatch batch;
  batch.indices = indices;
  for (int64_t r = 0; r < B; ++r) {
    const ClassificationExample& ex = set.examples[static_cast<size_t>(indices[r])];
    std::copy(ex.ids.begin(), ex.ids.end(), ids.begin() + r * T);
    std::copy(ex.types.begin(), ex.types.end(), types.begin() + r * T);
    lengths[static_cast<size_t>(r)] = static_cast<int32_t>(ex.ids.size());
    batch.tokens += static_cast<int64_t>(ex.ids.size());
    if (regression)
      targets.push_back(ex.target);
    else
      labels.push_back(ex.label);
  }
  batch.input_ids = Tensor::from_ints(ids, {B, T});
  batch.token_type_ids = Tensor::from_ints(types, {B, T});
  batch.lengths = Tensor::from_ints(lengths, {B});
  if (set.has_labels && regression) batch.targets = Tensor::from_floats(targets, {B});
  if (set.has_labels && !regression) batch.labels = Tensor::from_ints(labels, {B});
  return batch;
}

ClassificationBatcher::ClassificationBatcher(std::shared_ptr<const ClassificationSet> set,
                                             bool regression, ClassificationBatcherOptions o)
    : set_(std::move(set)), regression_(regression), opt_(o), plan_(set_ ? set_->size() : 0, o) {
  ROTOR_CHECK(set_ && set_->size() > 0, "ClassificationBatcher needs examples");
}

ClassificationHostBatch ClassificationBatcher::next() {
  return make_classification_batch(*set_, *plan_.next().ids, regression_);
}

}  // namespace rotor::data
