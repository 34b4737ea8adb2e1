#include "data/fingerprint.h"

#include <filesystem>

#include "core/error.h"
#include "core/hash.h"
#include "core/io.h"

namespace fs = std::filesystem;

namespace rotor::data {

using json_io::Json;

namespace {

constexpr int kVersion = 1;

std::string show(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

Fingerprint& Fingerprint::setting(const std::string& name, Json value) {
  settings_[name] = std::move(value);
  return *this;
}

Fingerprint& Fingerprint::file(const std::string& name, const std::string& path) {
  uint64_t bytes = 0;
  const uint64_t h = hash_file(path, &bytes);
  Json f = Json::object();
  f["path"] = path;
  f["bytes"] = bytes;
  f["hash"] = hex64(h);
  files_[name] = f;
  return *this;
}

std::string Fingerprint::file_hash(const std::string& name) const {
  return files_.contains(name) ? files_.at(name).value("hash", "") : "";
}

std::string Fingerprint::file_path(const std::string& name) const {
  return files_.contains(name) ? files_.at(name).value("path", "") : "";
}

std::string Fingerprint::difference(const Fingerprint& now) const {
  for (const auto& [name, value] : now.settings_.items()) {
    if (!settings_.contains(name))
      return fmt::format("{} is {} now and was not recorded", name, show(value));
    if (settings_.at(name) != value)
      return fmt::format("{} was {}, is {} now", name, show(settings_.at(name)), show(value));
  }
  for (const auto& [name, value] : settings_.items())
    if (!now.settings_.contains(name))
      return fmt::format("{} was {} and is no longer set", name, show(value));
  for (const auto& [name, f] : now.files_.items()) {
    const std::string path = f.value("path", "");
    if (!files_.contains(name)) return fmt::format("{} {} was not an input", name, path);
    // The same bytes under another name (a relative path from elsewhere) agree.
    const Json& old = files_.at(name);
    const uint64_t was = old.value("bytes", uint64_t{0}), is = f.value("bytes", uint64_t{0});
    if (was == is && old.value("hash", "") == f.value("hash", "")) continue;
    if (old.value("path", "") != path)
      return fmt::format("{} was {}, is {} now", name, old.value("path", ""), path);
    if (was != is) return fmt::format("{} {} changed ({} bytes, was {})", name, path, is, was);
    return fmt::format("{} {} changed (same size, other content)", name, path);
  }
  for (const auto& [name, f] : files_.items())
    if (!now.files_.contains(name))
      return fmt::format("{} {} is no longer an input", name, f.value("path", ""));
  return "";
}

Json Fingerprint::to_json() const {
  Json j = Json::object();
  j["rotor_fingerprint"] = kVersion;
  j["made_by"] = made_by_;
  j["settings"] = settings_;
  j["files"] = files_;
  return j;
}

void Fingerprint::save(const std::string& path) const {
  // A path that is not UTF-8 is recorded with U+FFFD for its bad bytes.
  atomic_write_file(path, to_json().dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

std::optional<Fingerprint> Fingerprint::load(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  return from_json(json_io::load(path), path);
}

bool Fingerprint::readable(const std::string& path) {
  try {
    return load(path).has_value();
  } catch (const Error&) {
    return false;
  }
}

Fingerprint Fingerprint::from_json(const Json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("rotor_fingerprint"))
    ROTOR_FAIL("{}: not a rotor fingerprint (no \"rotor_fingerprint\")", path);
  const int64_t version = json_io::get_int(j, "rotor_fingerprint", path);
  if (version != kVersion)
    ROTOR_FAIL("{}: fingerprint version {}, this rotor reads {}", path, version, kVersion);
  Fingerprint f(json_io::get_string(j, "made_by", path));
  const Json& settings = json_io::at(j, "settings", path);
  const Json& files = json_io::at(j, "files", path);
  if (!settings.is_object() || !files.is_object())
    ROTOR_FAIL("{}: \"settings\" and \"files\" must be objects", path);
  for (const auto& [name, f_] : files.items()) {
    const std::string where = "files." + name;
    if (!f_.is_object()) ROTOR_FAIL("{}: {} is not an object", path, where);
    (void)json_io::get_string(f_, "path", path);
    (void)json_io::get_int(f_, "bytes", path);
    (void)json_io::get_string(f_, "hash", path);
  }
  f.settings_ = settings;
  f.files_ = files;
  return f;
}

std::string fingerprint_path(const std::string& made) {
  const std::string suffix = ".model";
  std::string base = made;
  if (base.size() > suffix.size() &&
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
    base.resize(base.size() - suffix.size());
  return base + ".fingerprint.json";
}

std::string stale_reason(const std::string& path, const Fingerprint& now) {
  std::optional<Fingerprint> recorded;
  try {
    recorded = Fingerprint::load(path);
  } catch (const Error& e) {
    return fmt::format("its fingerprint is unreadable ({})", e.what());
  }
  if (!recorded)
    return fmt::format("it has no fingerprint ({}; made before rotor recorded them)", path);
  return recorded->difference(now);
}

}  // namespace rotor::data
