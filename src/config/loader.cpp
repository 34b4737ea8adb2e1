// YAML to Config: every key of the schema (config/schema.h) read, typed and
// range-checked, unknown and duplicate keys refused, each error naming the
// key's file line or its --set argument; then the cross-field rules
// (config/checks.cpp) with the origins of the keys.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "config/loading.h"
#include "config/schema.h"
#include "config/tasks.h"
#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"

namespace rotor {
namespace {

using namespace config_detail;

class Loader {
 public:
  Loader(std::string origin, std::vector<Override> overrides)
      : origins_(std::make_shared<KeyOrigins::Data>()) {
    origins_->origin = std::move(origin);
    origins_->overrides = std::move(overrides);
  }

  void load(const YAML::Node& root, Config& config) {
    if (root.IsDefined() && !root.IsNull() && !root.IsMap())
      fail_at("", root,
              "expected a mapping of config keys at the top level, got " + describe(root));
    push_frame("", root);
    visit_config(config, *this);
    pop_frame();
  }

  // Where every key came from, for the rules checked after loading.
  KeyOrigins origins() const { return KeyOrigins(origins_); }

  template <class T>
  void integer(const char* name, T& out, const IntRange& range) {
    const Entry* e = lookup(name);
    if (!e) return;
    std::optional<int64_t> v;
    if (e->value.IsScalar()) v = parse_int(trimmed(e->value.Scalar()));
    if (!v || *v < range.min || *v > range.max ||
        *v > static_cast<int64_t>(std::numeric_limits<T>::max()) ||
        *v < static_cast<int64_t>(std::numeric_limits<T>::min()))
      fail_value(*e, fmt::format("expected {}, got {}", range.what, describe(e->value)));
    out = static_cast<T>(*v);
  }

  void floating(const char* name, double& out, const FloatRange& range) {
    const Entry* e = lookup(name);
    if (!e) return;
    out = to_double(e->value, *e, e->path, range);
  }

  // `name`, the deprecated spelling of `key` (a full path, already visited):
  // it sets `out` unless `key` is written too, which is an error.
  void deprecated_floating(const char* name, const char* key, double& out,
                           const FloatRange& range) {
    const Entry* e = lookup(name);
    if (!e) return;
    if (origins_->lines.count(key))
      fail_value(*e, fmt::format("the deprecated spelling of {}, which is set too: keep only {}",
                                 key, key));
    out = to_double(e->value, *e, e->path, range);
    origins_->lines[key] = e->line0;
  }

  void float_pair(const char* name, std::array<double, 2>& out, const FloatRange& range) {
    const Entry* e = lookup(name);
    if (!e) return;
    if (!e->value.IsSequence() || e->value.size() != 2)
      fail_value(*e,
                 fmt::format("expected a list of two numbers, each {}, got {}", range.what,
                             e->value.IsSequence() ? fmt::format("a list of {}", e->value.size())
                                                   : describe(e->value)));
    for (size_t i = 0; i < 2; ++i)
      out[i] = to_double(e->value[i], *e, fmt::format("{}[{}]", e->path, i), range);
  }

  void boolean(const char* name, bool& out) {
    const Entry* e = lookup(name);
    if (!e) return;
    std::optional<bool> v;
    if (e->value.IsScalar()) v = parse_bool(trimmed(e->value.Scalar()));
    if (!v) fail_value(*e, "expected true or false, got " + describe(e->value));
    out = *v;
  }

  void string(const char* name, std::string& out) {
    const Entry* e = lookup(name);
    if (!e) return;
    if (e->value.IsNull())
      out.clear();  // `valid:` with nothing after it
    else if (e->value.IsScalar())
      out = utf8_scalar(*e);
    else
      fail_value(*e, "expected a string, got " + describe(e->value));
  }

  // A string value is stored in every checkpoint (config.yaml, and the
  // safetensors metadata, which JSON holds as UTF-8): a name that is not
  // UTF-8 would be accepted here and fail at the first save.
  template <class E>  // Entry, declared below
  std::string utf8_scalar(const E& e) {
    const std::string& v = e.value.Scalar();
    if (!json_io::is_valid_utf8(v))
      fail_value(e,
                 "not valid UTF-8; rotor stores its config as UTF-8 in every checkpoint: give a "
                 "name in UTF-8 (rename the file or directory)");
    return v;
  }

  void device(const char* name, std::string& out) {
    const Entry* e = lookup(name);
    if (!e) return;
    if (!e->value.IsScalar() || !is_device_name(trimmed(e->value.Scalar())))
      fail_value(*e, "expected auto, cpu, cuda or cuda:N, got " + describe(e->value));
    out = std::string(trimmed(e->value.Scalar()));
  }

  // A list of strings ("[a, b]"; one value alone is a list of one).
  void string_list(const char* name, std::vector<std::string>& out) {
    const Entry* e = lookup(name);
    if (!e) return;
    std::vector<std::string> values;
    if (e->value.IsScalar()) {
      values.push_back(e->value.Scalar());
    } else if (e->value.IsSequence()) {
      for (const auto& item : e->value) {
        if (!item.IsScalar())
          fail_value(*e, "expected a list of strings, got " + describe(item) + " in it");
        values.push_back(item.Scalar());
      }
    } else if (!e->value.IsNull()) {
      fail_value(*e, "expected a list of strings, got " + describe(e->value));
    }
    for (const std::string& v : values)
      if (!json_io::is_valid_utf8(v))
        fail_value(*e,
                   "an item is not valid UTF-8; rotor stores its config as UTF-8 in every "
                   "checkpoint");
    out = std::move(values);
  }

  template <ConfigEnum E>
  void enumeration(const char* name, E& out) {
    const Entry* e = lookup(name);
    if (!e) return;
    std::optional<E> v;
    if (e->value.IsScalar()) v = enum_from_string<E>(trimmed(e->value.Scalar()));
    if (!v)
      fail_value(*e,
                 fmt::format("expected one of {}, got {}", enum_choices<E>(), describe(e->value)));
    out = *v;
  }

  // A list of enum values, each once ("[loss, bleu]", or one value alone).
  template <ConfigEnum E>
  void enum_list(const char* name, std::vector<E>& out) {
    const Entry* e = lookup(name);
    if (!e) return;
    std::vector<YAML::Node> items;
    if (e->value.IsSequence())
      for (const auto& item : e->value) items.push_back(item);
    else if (e->value.IsScalar())
      items.push_back(e->value);
    else
      fail_value(
          *e, fmt::format("expected a list of {}, got {}", enum_choices<E>(), describe(e->value)));
    std::vector<E> values;
    for (const auto& item : items) {
      std::optional<E> v;
      if (item.IsScalar()) v = enum_from_string<E>(trimmed(item.Scalar()));
      if (!v)
        fail_value(*e, fmt::format("expected a list of {}, got {} in it", enum_choices<E>(),
                                   describe(item)));
      if (std::find(values.begin(), values.end(), *v) != values.end())
        fail_value(*e, fmt::format("{} is listed twice", to_string(*v)));
      values.push_back(*v);
    }
    out = std::move(values);
  }

  template <class F>
  void section(const char* name, F&& fill) {
    const Entry* e = lookup(name);
    YAML::Node node;  // undefined: the section is absent
    if (e) {
      if (!e->value.IsNull() && !e->value.IsMap())
        fail_value(*e, "expected a mapping of keys, got " + describe(e->value));
      node.reset(e->value);
    }
    push_frame(join_path(frames_.back().path, name), node);
    fill();
    pop_frame();
  }

 private:
  struct Entry {
    std::string key, path;
    YAML::Node key_node, value;
    int line0 = -1;  // 0-based line of the key
  };
  struct Frame {
    std::string path;
    std::vector<Entry> entries;
    std::vector<std::string> known;
  };

  static int line_of(const YAML::Node& n) { return n.IsDefined() ? n.Mark().line : -1; }

  std::string location(const std::string& path, int line0) const {
    return origins_->location(path, line0);
  }

  [[noreturn]] void fail_at(const std::string& path, const YAML::Node& node,
                            const std::string& message) const {
    std::string loc = location(path, line_of(node));
    if (path.empty()) ROTOR_FAIL("{}: {}", loc, message);
    ROTOR_FAIL("{}: {}: {}", loc, path, message);
  }

  [[noreturn]] void fail_value(const Entry& e, const std::string& message) const {
    fail_value(e, e.path, message, e.value);
  }
  [[noreturn]] void fail_value(const Entry& e, const std::string& path, const std::string& message,
                               const YAML::Node& value) const {
    int line = line_of(value);
    if (line < 0 || (value.IsNull() && e.line0 >= 0)) line = e.line0;
    ROTOR_FAIL("{}: {}: {}", location(path, line), path, message);
  }

  double to_double(const YAML::Node& node, const Entry& e, const std::string& path,
                   const FloatRange& range) {
    std::optional<double> v;
    if (node.IsScalar()) v = parse_double(trimmed(node.Scalar()));
    if (!v || !range.contains(*v))
      fail_value(e, path, fmt::format("expected {}, got {}", range.what, describe(node)), node);
    // Values reach the arithmetic as floats (the model's, the ops' and the
    // optimizer's type; the few keys kept as doubles are held to the same
    // range): 1e300 is a finite double but not a float, and 1e-50 is a
    // positive double that is 0 as a float.
    if (std::fabs(*v) > std::numeric_limits<float>::max())
      fail_value(e, path,
                 fmt::format("expected {}, got {}, beyond the range of a 32-bit float", range.what,
                             describe(node)),
                 node);
    if (*v != 0 && static_cast<float>(*v) == 0.0f)
      fail_value(e, path,
                 fmt::format("expected {}, got {}, which is 0 as a 32-bit float (the smallest "
                             "positive one is about 1.4e-45)",
                             range.what, describe(node)),
                 node);
    return *v;
  }

  void push_frame(std::string path, const YAML::Node& node) {
    Frame f;
    f.path = std::move(path);
    if (node.IsDefined() && node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        Entry e;
        e.key_node.reset(it->first);
        e.value.reset(it->second);
        e.line0 = line_of(it->first);
        if (!it->first.IsScalar())
          fail_at(f.path, it->first, "keys must be plain names, got " + describe(it->first));
        e.key = it->first.Scalar();
        e.path = join_path(f.path, e.key);
        for (const auto& prev : f.entries)
          if (prev.key == e.key) fail_at(e.path, it->first, "duplicate key");
        origins_->lines[e.path] = e.line0;
        f.entries.push_back(std::move(e));
      }
    }
    frames_.push_back(std::move(f));
  }

  void pop_frame() {
    const Frame& f = frames_.back();
    for (const auto& e : f.entries) {
      if (std::find(f.known.begin(), f.known.end(), e.key) != f.known.end()) continue;
      std::string message = "unknown key " + e.path;
      size_t best = 3;
      std::string suggestion;
      for (const auto& k : f.known) {
        size_t d = edit_distance(e.key, k);
        if (d < best) best = d, suggestion = k;
      }
      if (!suggestion.empty()) message += " (did you mean " + join_path(f.path, suggestion) + "?)";
      ROTOR_FAIL("{}: {}", location(e.path, e.line0), message);
    }
    frames_.pop_back();
  }

  const Entry* lookup(const char* name) {
    Frame& f = frames_.back();
    f.known.emplace_back(name);
    for (const auto& e : f.entries)
      if (e.key == name) return &e;
    return nullptr;
  }

  std::shared_ptr<KeyOrigins::Data> origins_;
  std::vector<Frame> frames_;
};

}  // namespace

Config load_config_from_string(const std::string& text, const std::string& origin,
                               const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own words for this are "bad file".
    ROTOR_FAIL("{}:{}:{}: invalid YAML: nested too deeply for the parser", origin, e.mark.line + 1,
               e.mark.column + 1);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) ROTOR_FAIL("{}: invalid YAML: {}", origin, e.msg);
    ROTOR_FAIL("{}:{}:{}: invalid YAML: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (root.IsDefined() && !root.IsNull() && !root.IsMap())
    ROTOR_FAIL("{}:{}: expected a mapping of config keys at the top level, got {}", origin,
               root.Mark().line + 1, describe(root));
  std::vector<Override> applied;
  if (!overrides.empty()) {
    YAML::Node defaults = YAML::Load(dump_config(Config{}));
    for (const auto& o : overrides) applied.push_back(apply_override(root, defaults, o));
  }
  Loader loader(origin, std::move(applied));
  Config config;
  loader.load(root, config);
  config.origins = loader.origins();
  apply_task_defaults(config);
  validate(config);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::string text;
  try {
    text = read_file(path, kMaxConfigBytes);
  } catch (const Error& e) {
    ROTOR_FAIL("config file: {}", e.what());
  }
  return load_config_from_string(text, path, overrides);
}

}  // namespace rotor
