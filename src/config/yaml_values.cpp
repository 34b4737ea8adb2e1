// Key paths, scalar conversions and the origins of keys (config/loading.h).
#include <algorithm>
#include <charconv>
#include <cmath>

#include "config/loading.h"
#include "core/io.h"

namespace rotor {

const Override* KeyOrigins::Data::override_for(const std::string& path) const {
  if (path.empty()) return nullptr;
  const std::vector<std::string> p = config_detail::split_path(path);
  const Override* found = nullptr;
  for (const auto& o : overrides) {
    const size_t n = std::min(p.size(), o.path.size());
    if (std::equal(p.begin(), p.begin() + static_cast<long>(n), o.path.begin()))
      found = &o;  // the last --set wins, as it does for the value
  }
  return found;
}

std::string KeyOrigins::Data::location(const std::string& path, int line0) const {
  if (const Override* o = override_for(path)) return "--set " + o->text;
  if (line0 >= 0) return fmt::format("{}:{}", origin, line0 + 1);
  return origin;
}

std::string KeyOrigins::locate(const std::vector<std::string>& keys) const {
  if (!data_) return "";
  for (const auto& key : keys) {
    if (data_->override_for(key)) return data_->location(key, -1);
    if (auto it = data_->lines.find(key); it != data_->lines.end())
      return data_->location(key, it->second);
  }
  return data_->origin;
}

bool KeyOrigins::written(const std::string& key) const {
  return data_ && (data_->override_for(key) || data_->lines.count(key) > 0);
}

namespace config_detail {

// ---- key paths ---------------------------------------------------------------

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out(1);
  for (char ch : path) {
    if (ch == '.' || ch == '[')
      out.emplace_back();
    else if (ch != ']')
      out.back().push_back(ch);
  }
  return out;
}

std::string join_path(const std::string& prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : prefix + "." + std::string(name);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing (null)";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return json_quote(node.Scalar());
}

// ---- scalar conversions ------------------------------------------------------

std::string_view trimmed(const std::string& s) {
  std::string_view v(s);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double d = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_int(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t i = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), i);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return i;
  // 1e5 or 100000.0 are integers too.
  std::optional<double> d = parse_double(s);
  if (d && std::floor(*d) == *d && std::abs(*d) < 9.2e18) return static_cast<int64_t>(*d);
  return std::nullopt;
}

std::optional<bool> parse_bool(std::string_view s) {
  for (std::string_view t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
    if (s == t) return true;
  for (std::string_view f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
    if (s == f) return false;
  return std::nullopt;
}

bool is_device_name(std::string_view s) {
  if (s == "auto" || s == "cpu" || s == "cuda") return true;
  if (s.substr(0, 5) != "cuda:" || s.size() == 5) return false;
  return std::all_of(s.begin() + 5, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace config_detail
}  // namespace rotor
