// Fingerprints of what rotor makes from data: a tokenizer it trained and a
// corpus it binarized record what made them, in MADE.fingerprint.json beside
// them (PREFIX.fingerprint.json for a prepared prefix, OUTPUT_DIR/
// spm.fingerprint.json for OUTPUT_DIR/spm.model):
//
//   {"rotor_fingerprint": 1, "made_by": "rotor train",
//    "settings": {"data.vocab_size": 8000, ...},
//    "files": {"tokenizer": {"path": ..., "bytes": ..., "hash": ...},
//              "data.train.en": {...}, ...}}
//
// settings are the config keys (or `rotor prepare` options) that shape the
// product; files are its inputs with their size and content hash
// (core/hash.h). A product is current when the fingerprint beside it equals
// the one its inputs and settings give now; the first difference, in the
// order settings, then files as added, is what messages name.
#pragma once

#include <optional>
#include <string>

#include "core/json_io.h"

namespace rotor::data {

class Fingerprint {
 public:
  explicit Fingerprint(std::string made_by = "rotor") : made_by_(std::move(made_by)) {}

  // Settings take names of config keys ("data.max_len") or options ("--max-len").
  Fingerprint& setting(const std::string& name, json_io::Json value);
  // Hashes the file now (a rotor::Error naming it when it cannot be read).
  Fingerprint& file(const std::string& name, const std::string& path);

  // The recorded hash and path of the file `name` ("" when not recorded).
  std::string file_hash(const std::string& name) const;
  std::string file_path(const std::string& name) const;

  // What differs between this recorded fingerprint and `now`, as one phrase
  // ("data.max_len was 250, is 100 now", "data.train.en corpus.en changed
  // (120 bytes, was 118)"); "" when they agree.
  std::string difference(const Fingerprint& now) const;

  json_io::Json to_json() const;
  // Written atomically (core/io.h).
  void save(const std::string& path) const;
  // The fingerprint at `path`, nullopt when there is none. A file that is not
  // a fingerprint is a rotor::Error naming it.
  static std::optional<Fingerprint> load(const std::string& path);
  // Whether `path` holds a fingerprint this rotor reads (false when there is
  // none, or a file that is not one).
  static bool readable(const std::string& path);
  // The fingerprint `json` (to_json's form) that `where` holds; a rotor::Error
  // naming `where` when it is not one.
  static Fingerprint from_json(const json_io::Json& json, const std::string& where);

 private:
  std::string made_by_;
  json_io::Json settings_ = json_io::Json::object();
  json_io::Json files_ = json_io::Json::object();
};

// Where the fingerprint of `made` lives: "PREFIX" and "PREFIX.model" give
// "PREFIX.fingerprint.json".
std::string fingerprint_path(const std::string& made);

// Why the product whose fingerprint is at `path` does not match `now`: ""
// when it matches; "it has no fingerprint (...)" when there is none; the
// difference otherwise; "PATH is unreadable: ..." for a damaged file.
std::string stale_reason(const std::string& path, const Fingerprint& now);

}  // namespace rotor::data
