#include "data/tsv.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "core/error.h"
#include "data/utf8.h"

namespace rotor::data {

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

// The lines of `text`: each ends at "\n", "\r\n" or a lone "\r" (old Mac
// text); the last one without an end included.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
    if (end + 1 < text.size() && text[end] == '\r' && text[end + 1] == '\n') ++start;
  }
  return lines;
}

// A regression label: a decimal number (a leading '+' allowed) that a float
// holds (1e300 is a finite double but an infinite float).
std::optional<float> parse_target(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(v) ||
      std::fabs(v) > std::numeric_limits<float>::max())
    return std::nullopt;
  return static_cast<float>(v);
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

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The labels of a multilabel field (TsvFormat::multilabel says how).
std::vector<std::string_view> split_label_list(std::string_view field, char sep,
                                               const std::string& path, size_t line) {
  std::vector<std::string_view> out;
  if (trim_spaces(field).empty()) return out;
  size_t start = 0;
  for (size_t i = 0; i <= field.size(); ++i) {
    if (i < field.size() && field[i] != sep) continue;
    const std::string_view label = trim_spaces(field.substr(start, i - start));
    start = i + 1;
    if (!label.empty())
      out.push_back(label);
    else if (sep != ' ')
      ROTOR_FAIL(
          "{}:{}: an empty label in \"{}\" (labels separated by \"{}\", "
          "data.label_separator)",
          path, line, field, sep);
  }
  return out;
}

// The lines of a TSV text (a byte-order mark skipped), checked to be UTF-8.
std::vector<std::string_view> checked_lines(std::string_view text, const std::string& path) {
  // A UTF-8 byte-order mark (Windows editors write one) is not part of the header.
  std::string_view body = text;
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);
  const std::vector<std::string_view> lines = split_lines(body);
  for (size_t i = 0; i < lines.size(); ++i)
    if (const size_t bad = find_invalid_utf8(lines[i]); bad != std::string_view::npos)
      ROTOR_FAIL("{}:{}: invalid UTF-8 at byte {} of the line", path, i + 1, bad + 1);
  return lines;
}

// The multiple-choice layout (TsvFormat::choices).
TsvRows parse_choice_rows(std::string_view text, const std::string& path, const TsvFormat& f,
                          bool require_labels) {
  const std::vector<std::string_view> lines = checked_lines(text, path);
  const size_t first = f.header ? 1 : 0;
  const size_t N = static_cast<size_t>(f.choices);
  TsvRows rows;
  rows.has_labels = true;
  // The header, else the first example, says whether there is a label column.
  size_t i = first;
  while (i < lines.size() && lines[i].empty()) ++i;
  const size_t decides = f.header ? 0 : i;
  const size_t width = decides < lines.size() ? split_tabs(lines[decides]).size() : N + 2;
  if (f.header && width != N + 1 && width != N + 2)
    ROTOR_FAIL("{}:1: the header has {} columns; {} choices need {} (label, context, choices)",
               path, width, N, N + 2);
  if (width == N + 1 && require_labels)
    ROTOR_FAIL("{}:{}: no label column: {} fields, {} choices need {} (label, context, choices)",
               path, decides + 1, width, N, N + 2);
  if (width == N + 1) rows.has_labels = false;  // context and choices only (a test set)
  const size_t want = rows.has_labels ? N + 2 : N + 1;
  for (; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // blank lines hold no example
    const std::vector<std::string_view> fields = split_tabs(lines[i]);
    if (fields.size() != want)
      ROTOR_FAIL("{}:{}: {} tab-separated fields, but {} choices need {} ({}context, {} choices)",
                 path, i + 1, fields.size(), N, want, rows.has_labels ? "label, " : "", N);
    size_t c = 0;
    if (rows.has_labels) {
      const std::string_view label = fields[c++];
      int64_t k = -1;
      const auto r = std::from_chars(label.data(), label.data() + label.size(), k);
      if (label.empty() || r.ec != std::errc() || r.ptr != label.data() + label.size() || k < 0 ||
          k >= f.choices)
        ROTOR_FAIL(
            "{}:{}: label \"{}\" is not the index of a choice, 0 to {} (the first column, "
            "data.choices: {})",
            path, i + 1, label, f.choices - 1, f.choices);
      rows.labels.push_back(static_cast<int32_t>(k));
    }
    rows.s1.push_back(fields[c++]);
    rows.candidates.emplace_back(fields.begin() + static_cast<std::ptrdiff_t>(c), fields.end());
  }
  if (rows.size() == 0) ROTOR_FAIL("{}: no examples{}", path, f.header ? " after the header" : "");
  return rows;
}

// parse_classification_tsv; with `vocabulary`, a multilabel file's labels go
// there instead of being looked up.
TsvRows parse_rows(std::string_view text, const std::string& path, const TsvFormat& f,
                   bool require_labels, std::set<std::string, std::less<>>* vocabulary) {
  if (f.choices > 0) return parse_choice_rows(text, path, f, require_labels);
  const std::vector<std::string_view> lines = checked_lines(text, path);
  TsvRows rows;
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
  rows.has_labels = cl >= 0;
  if (!f.header && rows.has_labels) {
    // Without a header, a file whose first example has no label field (a
    // test set) has no labels.
    size_t i = first;
    while (i < lines.size() && lines[i].empty()) ++i;
    if (i < lines.size() && static_cast<int64_t>(split_tabs(lines[i]).size()) <= cl)
      rows.has_labels = false;
  }
  if (require_labels && !rows.has_labels)
    ROTOR_FAIL("{}: no label column {} (data.label_column)", path, f.label);
  const int64_t needed = std::max({c1, c2, rows.has_labels ? cl : -1}) + 1;

  for (size_t i = first; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // blank lines hold no example
    const std::vector<std::string_view> fields = split_tabs(lines[i]);
    if (f.header && fields.size() != header.size())
      ROTOR_FAIL("{}:{}: {} tab-separated fields, but the header has {}", path, i + 1,
                 fields.size(), header.size());
    if (static_cast<int64_t>(fields.size()) < needed)
      ROTOR_FAIL("{}:{}: {} tab-separated fields, but column {} is needed", path, i + 1,
                 fields.size(), needed - 1);
    if (rows.has_labels) {
      const std::string_view label = fields[static_cast<size_t>(cl)];
      if (f.multilabel) {
        std::vector<int32_t> set;
        for (const std::string_view l : split_label_list(label, f.label_separator, path, i + 1)) {
          if (vocabulary) {
            if (vocabulary->find(l) == vocabulary->end()) vocabulary->emplace(l);
            continue;
          }
          const auto it = std::find(f.labels.begin(), f.labels.end(), l);
          if (it == f.labels.end())
            ROTOR_FAIL(
                "{}:{}: label \"{}\" is not one of the run's {} labels (data.labels, or else "
                "the labels of data.train)",
                path, i + 1, l, f.labels.size());
          set.push_back(static_cast<int32_t>(it - f.labels.begin()));
        }
        std::sort(set.begin(), set.end());
        set.erase(std::unique(set.begin(), set.end()), set.end());
        rows.label_sets.push_back(std::move(set));
      } else if (f.regression) {
        const std::optional<float> v = parse_target(label);
        if (!v)
          ROTOR_FAIL(
              "{}:{}: label \"{}\" is not a number a 32-bit float holds (data.regression is true)",
              path, i + 1, label);
        rows.targets.push_back(*v);
      } else {
        const auto it = std::find(f.labels.begin(), f.labels.end(), label);
        if (it == f.labels.end()) {
          std::string known;
          for (const auto& l : f.labels) known += (known.empty() ? "" : ", ") + l;
          ROTOR_FAIL("{}:{}: label \"{}\" is not one of data.labels [{}]", path, i + 1, label,
                     known);
        }
        rows.labels.push_back(static_cast<int32_t>(it - f.labels.begin()));
      }
    }
    rows.s1.push_back(fields[static_cast<size_t>(c1)]);
    if (pair) rows.s2.push_back(fields[static_cast<size_t>(c2)]);
  }
  if (rows.size() == 0) ROTOR_FAIL("{}: no examples", path);
  return rows;
}

}  // namespace

TsvRows parse_classification_tsv(std::string_view text, const std::string& path, const TsvFormat& f,
                                 bool require_labels) {
  return parse_rows(text, path, f, require_labels, nullptr);
}

std::vector<std::string> label_vocabulary(std::string_view text, const std::string& path,
                                          const TsvFormat& f) {
  ROTOR_CHECK(f.multilabel, "label_vocabulary: not a multilabel format");
  std::set<std::string, std::less<>> vocabulary;
  parse_rows(text, path, f, /*require_labels=*/true, &vocabulary);
  return {vocabulary.begin(), vocabulary.end()};
}

}  // namespace rotor::data
