// Metrics as JSON lines (docs/design.md, "Logging and metrics"): OUTPUT_DIR/metrics.jsonl gets
// one flat object per record, fields in the order they were added, flushed at
// once so that plots can follow a running job.
//
//   MetricsWriter metrics(out_dir + "/metrics.jsonl");
//   metrics.write(MetricsRecord().add("split", "train").add("step", step).add("loss", loss));
//
// A line is compact JSON (core/json_io.h): {"split":"train","step":100,...}.
// Numbers are written as a short text that reads back exactly (a float as the
// float it is: 2.345678f -> 2.345678); a non-finite value (a diverged loss) as
// null, JSON having no NaN.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/json_io.h"

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
    return set(key, value);
  }

  bool empty() const { return fields_.empty(); }
  const json_io::Json& fields() const { return fields_; }
  // The record as one line of compact JSON (no newline).
  std::string json() const;

 private:
  // A repeated key replaces the value in place.
  MetricsRecord& set(std::string_view key, json_io::Json value);
  json_io::Json fields_ = json_io::Json::object();
};

// Keeps the records of `path` whose "step" is at most `last_step` (and drops
// lines that do not parse: a record torn by a kill), rewriting the file
// atomically; a missing file stays missing. A resumed run calls it so that
// the steps after its checkpoint are not in the file twice.
void truncate_metrics(const std::string& path, int64_t last_step);

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
