// Metrics as JSON lines (DESIGN.md decision 11): OUTPUT_DIR/metrics.jsonl gets
// one flat object per record, fields in the order they were added, flushed at
// once so that plots can follow a running job.
//
//   MetricsWriter metrics(out_dir + "/metrics.jsonl");
//   metrics.write(MetricsRecord().add("split", "train").add("step", step).add("loss", loss));
//
// Numbers are written as the shortest text that reads back exactly (a float
// as a float: 2.5f -> 2.5); NaN and infinities as NaN/Infinity/-Infinity,
// which Python's json reads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace rotor {

class MetricsRecord {
 public:
  MetricsRecord& add(std::string_view key, std::string_view value);
  MetricsRecord& add(std::string_view key, const char* value) {
    return add(key, std::string_view(value));
  }
  MetricsRecord& add(std::string_view key, const std::string& value) {
    return add(key, std::string_view(value));
  }
  MetricsRecord& add(std::string_view key, bool value);
  MetricsRecord& add(std::string_view key, double value);
  MetricsRecord& add(std::string_view key, float value);
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  MetricsRecord& add(std::string_view key, I value) {
    return add_raw(key, std::to_string(value));
  }

  bool empty() const { return fields_.empty(); }
  // The record as one line of compact JSON (no newline).
  std::string json() const;

 private:
  MetricsRecord& add_raw(std::string_view key, std::string json_value);
  std::vector<std::pair<std::string, std::string>> fields_;  // key, JSON text
};

class MetricsWriter {
 public:
  MetricsWriter() = default;  // closed: write() does nothing (e.g. on ranks other than 0)
  // Opens `path` for appending (a resumed run continues the file); parent
  // directories are created. Failure is a rotor::Error.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(MetricsWriter&& other) noexcept;
  MetricsWriter& operator=(MetricsWriter&& other) noexcept;
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  // Appends the record as one line and flushes it.
  void write(const MetricsRecord& record);
  void close();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace rotor
