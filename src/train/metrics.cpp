#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/io.h"

namespace rotor {

MetricsRecord& MetricsRecord::set(std::string_view key, json_io::Json value) {
  fields_[std::string(key)] = std::move(value);
  return *this;
}

MetricsRecord& MetricsRecord::add(std::string_view key, std::string_view value) {
  return set(key, value);
}
MetricsRecord& MetricsRecord::add(std::string_view key, bool value) {
  return set(key, value);
}
MetricsRecord& MetricsRecord::add(std::string_view key, double value) {
  return set(key, value);
}
MetricsRecord& MetricsRecord::add(std::string_view key, float value) {
  return set(key, json_io::shortest_decimal(value));
}

std::string MetricsRecord::json() const {
  // A string that is not UTF-8 (a file name, say) must not stop training: its
  // bad bytes become U+FFFD.
  return fields_.dump(-1, ' ', false, json_io::Json::error_handler_t::replace);
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

void truncate_metrics(const std::string& path, int64_t last_step) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  const std::string text = read_file(path);
  std::string kept;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    const json_io::Json rec = json_io::Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!rec.is_object() || !rec.contains("step") || !rec["step"].is_number_integer()) continue;
    if (rec["step"].get<int64_t>() > last_step) continue;
    kept.append(line);
    kept += '\n';
  }
  if (kept.size() != text.size()) atomic_write_file(path, kept);
}

}  // namespace rotor
