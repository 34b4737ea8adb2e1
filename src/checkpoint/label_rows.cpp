#include "checkpoint/label_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "checkpoint/checkpoint.h"
#include "config/tasks.h"
#include "core/error.h"
#include "core/json_io.h"
#include "models/bert_classifier.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

// "a, b, c" (the first five, then how many more).
std::string some(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 5; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 5) s += fmt::format(" and {} more", names.size() - 5);
  return s;
}

}  // namespace

LabelRows map_label_rows(const std::vector<std::string>& from, int64_t from_rows,
                         const std::vector<std::string>& to, int64_t to_rows,
                         const std::string& where) {
  LabelRows m;
  m.source.assign(static_cast<size_t>(to_rows), -1);
  const bool named = !from.empty() && static_cast<int64_t>(from.size()) == from_rows &&
                     !to.empty() && static_cast<int64_t>(to.size()) == to_rows;
  if (!named) {
    if (from_rows == to_rows) {
      for (int64_t r = 0; r < to_rows; ++r) m.source[static_cast<size_t>(r)] = r;
      return m;
    }
    m.identity = false;
    m.none = true;
    m.note = fmt::format(
        "{}'s classifier has {} outputs, the task {}: its label rows keep their fresh "
        "initialization",
        where, from_rows, to_rows);
    return m;
  }
  std::unordered_map<std::string, int64_t> row_of;
  for (size_t i = 0; i < from.size(); ++i) row_of.emplace(from[i], static_cast<int64_t>(i));
  std::vector<std::string> missing;
  for (size_t r = 0; r < to.size(); ++r) {
    const auto it = row_of.find(to[r]);
    if (it == row_of.end()) {
      missing.push_back(to[r]);
      continue;
    }
    m.source[r] = it->second;
    if (it->second != static_cast<int64_t>(r)) m.identity = false;
  }
  const size_t found = to.size() - missing.size();
  if (missing.empty() && from_rows == to_rows) {
    if (!m.identity)
      m.note = fmt::format(
          "{} lists the task's {} labels in another order: the classifier's label rows are "
          "read by name, in the task's order",
          where, to.size());
    return m;
  }
  m.identity = false;
  if (found == 0) {
    m.none = true;
    m.note = fmt::format(
        "none of the task's labels ({}) is one of {}'s ({}): the classifier's label rows keep "
        "their fresh initialization",
        some(to), where, some(from));
  } else if (missing.empty()) {
    m.note = fmt::format(
        "the task's {} labels are among {}'s {}: their classifier rows are read by name", to.size(),
        where, from.size());
  } else {
    m.note = fmt::format(
        "{} of the task's {} labels are {}'s: their classifier rows are read by name; those of "
        "{} keep their fresh initialization",
        found, to.size(), where, some(missing));
  }
  return m;
}

LabelRows label_rows_of(const nn::Parameter& p, const Shape& shape,
                        const std::vector<std::string>& from, const std::vector<std::string>& to,
                        const std::string& where, std::vector<std::string>& notes) {
  if (!models::has_label_rows(p.name) || shape.empty() || p.shape.empty() ||
      shape.size() != p.shape.size() ||
      !std::equal(shape.begin() + 1, shape.end(), p.shape.begin() + 1))
    return {};
  LabelRows m = map_label_rows(from, shape[0], to, p.shape[0], where);
  if (!m.note.empty() && std::find(notes.begin(), notes.end(), m.note) == notes.end())
    notes.push_back(m.note);
  return m;
}

void read_label_rows(Tensor& value, const std::vector<float>& source, const LabelRows& m) {
  const int64_t rows = value.size(0);
  ROTOR_CHECK(static_cast<int64_t>(m.source.size()) == rows, "label rows: {} rows mapped for {}",
              m.source.size(), rows);
  std::vector<float> v = value.to_floats();
  const size_t width = rows > 0 ? v.size() / static_cast<size_t>(rows) : 0;
  for (size_t r = 0; r < m.source.size(); ++r) {
    const int64_t s = m.source[r];
    if (s < 0) continue;
    ROTOR_CHECK((static_cast<size_t>(s) + 1) * width <= source.size(),
                "label rows: row {} past the checkpoint's {} values", s, source.size());
    std::copy_n(source.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s) * width), width,
                v.begin() + static_cast<std::ptrdiff_t>(r * width));
  }
  value.copy_from(Tensor::from_floats(v, value.shape()));
}

std::vector<std::string> hf_label_names(const nlohmann::ordered_json& config,
                                        const std::string& where) {
  if (!config.contains("id2label") || !config.at("id2label").is_object()) return {};
  const json_io::Json& id2label = config.at("id2label");
  std::vector<std::string> names(id2label.size());
  bool defaults = true;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string key = std::to_string(i);
    if (!id2label.contains(key))
      ROTOR_FAIL("{}: id2label has {} entries but no \"{}\"", where, names.size(), key);
    names[i] = json_io::get_string(id2label, key, where + ": id2label");
    if (names[i] != "LABEL_" + key) defaults = false;
  }
  if (defaults) return {};
  return names;
}

std::vector<std::string> checkpoint_label_names(const std::string& dir, const Config& config) {
  std::error_code ec;
  const std::string labels = (fs::path(dir) / kLabelsFile).string();
  if (fs::exists(labels, ec)) return read_labels_file(labels);
  if (config.task->labels == LabelMode::Single && !config.data.regression &&
      config.data.choices == 0)
    return config.data.labels;
  return {};
}

}  // namespace rotor::checkpoint
