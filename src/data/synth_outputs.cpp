#include "data/synth_outputs.h"

#include <filesystem>

#include "core/error.h"
#include "core/hash.h"
#include "core/io.h"
#include "core/json_io.h"

namespace fs = std::filesystem;

namespace rotor::data {

namespace {

constexpr const char* kWrittenBy = "rotor synth";

}  // namespace

void write_synth_files(const std::string& dir, const std::string& task,
                       const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string record_path = (fs::path(dir) / kSynthRecord).string();
  const std::string give = "give a new or empty directory (nothing was written)";
  std::error_code ec;
  // What an earlier synth recorded (its files by name).
  json_io::Json recorded = json_io::Json::object();
  if (fs::exists(fs::symlink_status(record_path, ec))) {
    json_io::Json old;
    try {
      old = json_io::load(record_path);
    } catch (const Error&) {
      ROTOR_FAIL("synth: {} exists and is not a record of rotor synth; {}", record_path, give);
    }
    if (!old.is_object() || !old.contains("written_by") || old["written_by"] != kWrittenBy ||
        !old.contains("files") || !old["files"].is_object())
      ROTOR_FAIL("synth: {} exists and is not a record of rotor synth; {}", record_path, give);
    recorded = old["files"];
  }
  for (const auto& [name, text] : files) {
    const std::string path = (fs::path(dir) / name).string();
    // Links are followed (a linked file is written at its target, core/io.h);
    // a FIFO or a character device is written into, never replaced.
    const fs::file_status st = fs::status(path, ec);
    if (!fs::exists(st) || fs::is_fifo(st) || fs::is_character_file(st)) continue;
    const bool listed = recorded.contains(name) && recorded[name].is_object();
    bool same = false;
    if (fs::is_regular_file(st) && listed) {
      const json_io::Json& r = recorded[name];
      uint64_t size = 0;
      const uint64_t h = hash_file(path, &size);
      same = r.contains("bytes") && r["bytes"].is_number_unsigned() &&
             r["bytes"].get<uint64_t>() == size && r.contains("hash64") && r["hash64"] == hex64(h);
    }
    if (!same && listed)
      ROTOR_FAIL("synth: {} changed since rotor synth wrote it ({}); {}", path, record_path, give);
    if (!same)
      ROTOR_FAIL(
          "synth: {} exists and is not an earlier output of rotor synth ({} does not record it); "
          "{}",
          path, record_path, give);
  }
  ensure_directory(dir);
  for (const auto& [name, text] : files) {
    atomic_write_file((fs::path(dir) / name).string(), text);
    recorded[name] = {{"task", task}, {"bytes", text.size()}, {"hash64", hex64(hash64(text))}};
  }
  json_io::Json record = json_io::Json::object();
  record["written_by"] = kWrittenBy;
  record["files"] = recorded;
  atomic_write_file(record_path, record.dump(2) + "\n");
}

}  // namespace rotor::data
