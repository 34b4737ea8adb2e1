// Internals of config loading shared by its files (docs/design.md, "Config"):
// key paths, scalar conversions, --set overrides and the origins of keys.
// Not part of the public contract; config/config.h is.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace rotor {

// One --set: where it points and its text, so that errors it causes name it.
struct Override {
  std::vector<std::string> path;
  std::string text;
};

// What KeyOrigins holds: the file (or string) the config came from, the line
// of every key written there and the --set overrides applied on top.
struct KeyOrigins::Data {
  std::string origin;
  std::map<std::string, int> lines;  // key path -> 0-based line in the file
  std::vector<Override> overrides;

  // The last --set that set `path` or a section holding it, else nullptr.
  const Override* override_for(const std::string& path) const;
  // Where `path` came from: the --set that set it, else ORIGIN:LINE (line0
  // 0-based; < 0: the origin alone).
  std::string location(const std::string& path, int line0) const;
};

namespace config_detail {

// "optim.betas[1]" and "optim.betas.1" -> {"optim", "betas", "1"}.
std::vector<std::string> split_path(std::string_view path);
std::string join_path(const std::string& prefix, std::string_view name);
size_t edit_distance(std::string_view a, std::string_view b);
// A YAML value for messages: "nothing (null)", "a list", "a mapping", or the
// quoted scalar.
std::string describe(const YAML::Node& node);

std::string_view trimmed(const std::string& s);
std::optional<double> parse_double(std::string_view s);
// 1e5 and 100000.0 are integers too.
std::optional<int64_t> parse_int(std::string_view s);
std::optional<bool> parse_bool(std::string_view s);
bool is_device_name(std::string_view s);

// Applies one --set ("a.b=c") to the YAML tree. `defaults` is the tree of the
// default config: it tells what a key absent from the file is (a list to
// index into, a scalar that has no sub-keys).
Override apply_override(YAML::Node& root, const YAML::Node& defaults, const std::string& text);

}  // namespace config_detail
}  // namespace rotor
