#include "tasks/classifier/tsv_rules.h"

#include <fmt/format.h>

#include <charconv>

namespace rotor::tasks {
namespace {

bool is_column_index(const std::string& s) {
  int64_t i = -1;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), i);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && i >= 0;
}

}  // namespace

std::optional<ConfigProblem> tsv_rules(const Config& c) {
  const DataConfig& d = c.data;
  if (d.sentence1_column.empty())
    return ConfigProblem{"data.sentence1_column", "empty; name the column of the (first) sentence"};
  if (d.label_column.empty())
    return ConfigProblem{"data.label_column", "empty; name the column of the labels"};
  if (d.label_column == d.sentence1_column || d.label_column == d.sentence2_column ||
      d.sentence2_column == d.sentence1_column)
    return ConfigProblem{"data.label_column",
                         "data.sentence1_column, data.sentence2_column and data.label_column "
                         "must name different columns",
                         {"data.sentence2_column", "data.sentence1_column"}};
  if (!d.header) {
    const std::pair<const char*, const std::string*> columns[] = {
        {"data.sentence1_column", &d.sentence1_column},
        {"data.sentence2_column", &d.sentence2_column},
        {"data.label_column", &d.label_column}};
    for (const auto& [key, name] : columns)
      if (!name->empty() && !is_column_index(*name))
        return ConfigProblem{key,
                             fmt::format("\"{}\" is not a column index (0, 1, ...), and "
                                         "data.header is false: the columns have no names",
                                         *name),
                             {"data.header"}};
  }
  const int need = d.sentence2_column.empty() ? 3 : 5;  // [CLS] a [SEP] (b [SEP])
  if (d.seq_len < need)
    return ConfigProblem{
        "data.seq_len",
        fmt::format("{} tokens cannot hold [CLS] a [SEP]{} with a token of each sentence; at "
                    "least {}",
                    d.seq_len, d.sentence2_column.empty() ? "" : " b [SEP]", need)};
  return std::nullopt;
}

std::optional<ConfigProblem> distinct_labels(const DataConfig& d) {
  for (size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i].empty()) return ConfigProblem{"data.labels", "an empty label"};
    for (size_t j = 0; j < i; ++j)
      if (d.labels[j] == d.labels[i])
        return ConfigProblem{"data.labels", fmt::format("\"{}\" is listed twice", d.labels[i])};
  }
  return std::nullopt;
}

}  // namespace rotor::tasks
