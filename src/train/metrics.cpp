#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/io.h"
#include "core/json.h"

namespace rotor {

MetricsRecord& MetricsRecord::add_raw(std::string_view key, std::string json_value) {
  for (auto& f : fields_) {
    if (f.first == key) {  // a repeated key replaces the value in place
      f.second = std::move(json_value);
      return *this;
    }
  }
  fields_.emplace_back(std::string(key), std::move(json_value));
  return *this;
}

MetricsRecord& MetricsRecord::add(std::string_view key, std::string_view value) {
  return add_raw(key, json_quote(value));
}
MetricsRecord& MetricsRecord::add(std::string_view key, bool value) {
  return add_raw(key, value ? "true" : "false");
}
MetricsRecord& MetricsRecord::add(std::string_view key, double value) {
  return add_raw(key, json::format_number(value));
}
MetricsRecord& MetricsRecord::add(std::string_view key, float value) {
  return add_raw(key, json::format_number(value));
}

std::string MetricsRecord::json() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ", ";
    out += json_quote(fields_[i].first);
    out += ": ";
    out += fields_[i].second;
  }
  out += "}";
  return out;
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) ensure_directory(parent.string());
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) ROTOR_FAIL("cannot open metrics file {}: {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  close();
}

MetricsWriter::MetricsWriter(MetricsWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(other.file_) {
  other.file_ = nullptr;
}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    file_ = other.file_;
    other.file_ = nullptr;
  }
  return *this;
}

void MetricsWriter::write(const MetricsRecord& record) {
  if (!file_) return;
  std::string line = record.json();
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    ROTOR_FAIL("cannot write metrics file {}: {}", path_, std::strerror(errno));
}

void MetricsWriter::close() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace rotor
