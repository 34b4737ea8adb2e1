#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/io.h"

namespace rotor {
namespace {

// ---- the schema: every key once, for loading and dumping alike ---------------

struct IntRange {
  int64_t min;
  const char* what;
};
struct FloatRange {
  double lo, hi;
  bool lo_open, hi_open;
  const char* what;
  bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr IntRange kAnyInt{std::numeric_limits<int64_t>::min(), "an integer"};
constexpr IntRange kNonNegative{0, "an integer >= 0"};
constexpr IntRange kPositive{1, "a positive integer"};
constexpr FloatRange kAnyFloat{-kInf, kInf, true, true, "a number"};
constexpr FloatRange kPositiveF{0, kInf, true, true, "a number > 0"};
constexpr FloatRange kNonNegativeF{0, kInf, false, true, "a number >= 0"};
constexpr FloatRange kUnit{0, 1, false, false, "a number in [0, 1]"};
constexpr FloatRange kUnitOpenTop{0, 1, false, true, "a number in [0, 1)"};
constexpr FloatRange kUnitOpenBottom{0, 1, true, false, "a number in (0, 1]"};

// V is a Loader (C = Config) or a Dumper (C = const Config).
template <class C, class V>
void visit_config(C& c, V& v) {
  v.enumeration("task", c.task);
  v.string("output_dir", c.output_dir);
  v.integer("seed", c.seed, kNonNegative);
  v.device("device", c.device);
  v.enumeration("precision", c.precision);
  v.enumeration("log_level", c.log_level);
  v.section("model", [&] {
    auto& m = c.model;
    v.integer("encoder_layers", m.encoder_layers, kNonNegative);
    v.integer("decoder_layers", m.decoder_layers, kNonNegative);
    v.integer("d_model", m.d_model, kPositive);
    v.integer("n_heads", m.n_heads, kPositive);
    v.integer("d_ff", m.d_ff, kPositive);
    v.enumeration("activation", m.activation);
    v.floating("dropout", m.dropout, kUnitOpenTop);
    v.floating("attention_dropout", m.attention_dropout, kUnitOpenTop);
    v.floating("activation_dropout", m.activation_dropout, kUnitOpenTop);
    v.enumeration("norm", m.norm);
    v.floating("layer_norm_eps", m.layer_norm_eps, kPositiveF);
    v.enumeration("position", m.position);
    v.floating("rope_base", m.rope_base, kPositiveF);
    v.integer("max_positions", m.max_positions, kPositive);
    v.boolean("share_embeddings", m.share_embeddings);
    v.boolean("scale_embeddings", m.scale_embeddings);
    v.integer("type_vocab_size", m.type_vocab_size, kNonNegative);
    v.floating("init_std", m.init_std, kPositiveF);
    v.string("init_from", m.init_from);
  });
  v.section("attention", [&] {
    v.enumeration("impl", c.attention.impl);
    v.boolean("rope_in_kernel", c.attention.rope_in_kernel);
  });
  v.section("data", [&] {
    auto& d = c.data;
    v.string("src_lang", d.src_lang);
    v.string("tgt_lang", d.tgt_lang);
    v.string("train", d.train);
    v.string("valid", d.valid);
    v.string("test", d.test);
    v.string("spm_model", d.spm_model);
    v.integer("vocab_size", d.vocab_size, kPositive);
    v.enumeration("spm_model_type", d.spm_model_type);
    v.floating("character_coverage", d.character_coverage, kUnitOpenBottom);
    v.integer("max_len", d.max_len, kPositive);
    v.floating("max_len_ratio", d.max_len_ratio, kPositiveF);
    v.integer("max_tokens", d.max_tokens, kPositive);
    v.integer("seq_len", d.seq_len, kPositive);
    v.floating("mask_prob", d.mask_prob, kUnit);
    v.floating("mask_token_prob", d.mask_token_prob, kUnit);
    v.floating("random_token_prob", d.random_token_prob, kUnit);
    v.integer("prefetch", d.prefetch, kNonNegative);
    v.string("sentence1_column", d.sentence1_column);
    v.string("sentence2_column", d.sentence2_column);
    v.string("label_column", d.label_column);
    v.boolean("header", d.header);
    v.string_list("labels", d.labels);
    v.boolean("regression", d.regression);
  });
  v.section("train", [&] {
    auto& t = c.train;
    v.integer("max_updates", t.max_updates, kPositive);
    v.integer("max_epochs", t.max_epochs, kNonNegative);
    v.integer("batch_size", t.batch_size, kPositive);
    v.integer("update_freq", t.update_freq, kPositive);
    v.floating("clip_norm", t.clip_norm, kNonNegativeF);
    v.floating("label_smoothing", t.label_smoothing, kUnitOpenTop);
    v.integer("log_interval", t.log_interval, kPositive);
    v.integer("valid_interval", t.valid_interval, kNonNegative);
    v.integer("save_interval", t.save_interval, kNonNegative);
    v.integer("keep_last", t.keep_last, kPositive);
    v.integer("patience", t.patience, kNonNegative);
    v.enum_list("valid_metrics", t.valid_metrics);
    v.integer("valid_max_sentences", t.valid_max_sentences, kNonNegative);
    v.enumeration("best_metric", t.best_metric);
    v.floating("loss_scale", t.loss_scale, kPositiveF);
    v.integer("scale_window", t.scale_window, kPositive);
    v.integer("max_nonfinite", t.max_nonfinite, kPositive);
  });
  v.section("optim", [&] {
    auto& o = c.optim;
    v.enumeration("name", o.name);
    v.floating("lr", o.lr, kPositiveF);
    v.float_pair("betas", o.betas, kUnitOpenTop);
    v.floating("eps", o.eps, kPositiveF);
    v.floating("weight_decay", o.weight_decay, kNonNegativeF);
    v.enumeration("schedule", o.schedule);
    v.integer("warmup_updates", o.warmup_updates, kNonNegative);
    v.floating("warmup_init_lr", o.warmup_init_lr, kNonNegativeF);
    v.floating("end_lr", o.end_lr, kNonNegativeF);
  });
  v.section("decode", [&] {
    auto& d = c.decode;
    v.integer("beam", d.beam, kPositive);
    v.floating("lenpen", d.lenpen, kAnyFloat);
    v.floating("max_len_a", d.max_len_a, kAnyFloat);
    v.integer("max_len_b", d.max_len_b, kAnyInt);
  });
  v.section("dist", [&] {
    auto& d = c.dist;
    v.floating("bucket_mb", d.bucket_mb, kPositiveF);
    v.boolean("shard_optimizer", d.shard_optimizer);
    v.floating("timeout_s", d.timeout_s, kPositiveF);
    v.string("rendezvous", d.rendezvous);
    if constexpr (!std::is_const_v<C>) {
      const std::string& r = d.rendezvous;
      if (r != "auto" && r != "mpi" && !(r.rfind("file:", 0) == 0 && r.size() > 5))
        ROTOR_FAIL(
            "{}: dist.rendezvous: expected auto, mpi or file:DIR (a directory every rank "
            "reaches), got {}",
            v.location_of_any({"dist.rendezvous"}), json_quote(r));
    }
  });
}

// ---- key paths ---------------------------------------------------------------

// "optim.betas[1]" and "optim.betas.1" -> {"optim", "betas", "1"}.
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

// One --set: where it points and its text, so that errors it causes name it.
struct Override {
  std::vector<std::string> path;
  std::string text;
};

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

// ---- the loader --------------------------------------------------------------

class Loader {
 public:
  Loader(std::string origin, std::vector<Override> overrides)
      : origin_(std::move(origin)), overrides_(std::move(overrides)) {}

  void load(const YAML::Node& root, Config& config) {
    if (root.IsDefined() && !root.IsNull() && !root.IsMap())
      fail_at("", root,
              "expected a mapping of config keys at the top level, got " + describe(root));
    push_frame("", root);
    visit_config(config, *this);
    pop_frame();
  }

  // Where `path` came from: the --set that set it, or ORIGIN:LINE.
  std::string location(const std::string& path, int line0) const {
    if (const Override* o = override_for(path)) return "--set " + o->text;
    if (line0 >= 0) return fmt::format("{}:{}", origin_, line0 + 1);
    return origin_;
  }
  // The location of the first of `paths` set by --set, else of the first
  // written in the file, else the origin alone (all defaults).
  std::string location_of_any(const std::vector<std::string>& paths) const {
    for (const auto& p : paths)
      if (override_for(p)) return location(p, -1);
    for (const auto& p : paths)
      if (auto it = lines_.find(p); it != lines_.end()) return location(p, it->second);
    return origin_;
  }

  template <class T>
  void integer(const char* name, T& out, const IntRange& range) {
    const Entry* e = lookup(name);
    if (!e) return;
    std::optional<int64_t> v;
    if (e->value.IsScalar()) v = parse_int(trimmed(e->value.Scalar()));
    if (!v || *v < range.min || *v > static_cast<int64_t>(std::numeric_limits<T>::max()) ||
        *v < static_cast<int64_t>(std::numeric_limits<T>::min()))
      fail_value(*e, fmt::format("expected {}, got {}", range.what, describe(e->value)));
    out = static_cast<T>(*v);
  }

  void floating(const char* name, double& out, const FloatRange& range) {
    const Entry* e = lookup(name);
    if (!e) return;
    out = to_double(e->value, *e, e->path, range);
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
      out = e->value.Scalar();
    else
      fail_value(*e, "expected a string, got " + describe(e->value));
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

  const Override* override_for(const std::string& path) const {
    std::vector<std::string> p = split_path(path);
    const Override* found = nullptr;
    for (const auto& o : overrides_) {
      size_t n = std::min(p.size(), o.path.size());
      if (!path.empty() && std::equal(p.begin(), p.begin() + static_cast<long>(n), o.path.begin()))
        found = &o;  // the last --set wins, as it does for the value
    }
    return found;
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
        lines_[e.path] = e.line0;
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

  std::string origin_;
  std::vector<Override> overrides_;
  std::vector<Frame> frames_;
  std::map<std::string, int> lines_;  // key path -> 0-based line in the file
};

// ---- --set --------------------------------------------------------------------

// Applies one --set to the YAML tree. `defaults` is the tree of the default
// config: it tells what a key absent from the file is (a list to index into,
// a scalar that has no sub-keys).
Override apply_override(YAML::Node& root, const YAML::Node& defaults, const std::string& text) {
  size_t eq = text.find('=');
  std::string key =
      eq == std::string::npos ? std::string() : std::string(trimmed(text.substr(0, eq)));
  if (eq == std::string::npos || key.empty())
    ROTOR_FAIL("--set {}: expected KEY=VALUE, e.g. --set train.max_updates=1000", text);
  std::vector<std::string> path = split_path(key);
  for (const auto& c : path)
    if (c.empty()) ROTOR_FAIL("--set {}: malformed key \"{}\"", text, key);
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    ROTOR_FAIL("--set {}: the value is not valid YAML: {}", text, e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node cur, def;
  cur.reset(root);
  def.reset(defaults);
  std::string prefix;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& c = path[i];
    bool last = i + 1 == path.size();
    // A key absent from the file (or null there) takes the shape of its default.
    if (cur.IsNull()) {
      if (def.IsDefined() && def.IsSequence())
        cur = YAML::Clone(def);
      else if (!def.IsDefined() || def.IsMap() || def.IsNull())
        cur = YAML::Node(YAML::NodeType::Map);
    }
    if (cur.IsSequence()) {
      std::optional<int64_t> idx = parse_int(c);
      if (!idx || *idx < 0 || static_cast<size_t>(*idx) >= cur.size())
        ROTOR_FAIL("--set {}: {} is a list of {}; \"{}\" is not an index into it", text, prefix,
                   cur.size(), c);
      size_t k = static_cast<size_t>(*idx);
      if (last) {
        cur[k] = value;
      } else {
        YAML::Node next = cur[k];
        cur.reset(next);
        YAML::Node next_def =
            def.IsDefined() && def.IsSequence() && k < def.size() ? def[k] : YAML::Node();
        def.reset(next_def);
      }
      prefix += "[" + c + "]";
      continue;
    }
    if (!cur.IsMap())
      ROTOR_FAIL("--set {}: {} is not a section, it has no key \"{}\"", text, prefix, c);
    YAML::Node next_def;
    if (def.IsDefined() && def.IsMap()) {
      const YAML::Node& const_def = def;
      if (const_def[c]) next_def.reset(const_def[c]);
    }
    if (last) {
      cur[c] = value;
    } else {
      YAML::Node next = cur[c];
      if (!next.IsDefined()) {
        cur[c] = YAML::Node(YAML::NodeType::Null);
        next.reset(cur[c]);
      }
      cur.reset(next);
      def.reset(next_def);
    }
    prefix = join_path(prefix, c);
  }
  return Override{std::move(path), text};
}

// ---- cross-field checks -----------------------------------------------------

struct Problem {
  std::string path, message;
  std::vector<std::string> related = {};  // other keys involved, for the location
};

// Why task `c` cannot report `metric`, or "" when it can.
std::string metric_unavailable(const Config& c, ValidMetric metric) {
  const bool classes = c.task == Task::Classification && !c.data.regression;
  const bool regression = c.task == Task::Classification && c.data.regression;
  switch (metric) {
    case ValidMetric::Loss:
      return "";
    case ValidMetric::Bleu:
    case ValidMetric::Chrf:
      if (c.task == Task::Translation) return "";
      return fmt::format("{} scores translations; task {} has none", to_string(metric),
                         to_string(c.task));
    case ValidMetric::Accuracy:
      if (c.task == Task::Mlm || classes) return "";
      if (regression) return "accuracy needs class labels; data.regression is true";
      return fmt::format(
          "accuracy is the masked-token accuracy of task mlm or the accuracy of task "
          "classification; task {} has none",
          to_string(c.task));
    case ValidMetric::F1:
      if (classes && c.data.labels.size() == 2) return "";
      if (classes)
        return fmt::format(
            "f1 is the F1 of the second label of a two-label task; data.labels has {}",
            c.data.labels.size());
      break;
    case ValidMetric::Mcc:
      if (classes) return "";
      break;
    case ValidMetric::Pearson:
    case ValidMetric::Spearman:
      if (regression) return "";
      if (classes)
        return fmt::format("{} correlates numbers; it needs data.regression: true",
                           to_string(metric));
      break;
  }
  if (regression)
    return fmt::format("{} scores class labels; data.regression is true", to_string(metric));
  return fmt::format("{} is a score of task classification; task {} has none", to_string(metric),
                     to_string(c.task));
}

// Metrics a task reports in every validation, listed or not: the masked-token
// accuracy of mlm, and every score that applies to a classification task.
bool always_reported(const Config& c, ValidMetric metric) {
  if (c.task == Task::Mlm) return metric == ValidMetric::Accuracy;
  return c.task == Task::Classification && metric_unavailable(c, metric).empty();
}

// The TSV columns and labels of task classification.
std::optional<Problem> classification_problem(const Config& c) {
  const DataConfig& d = c.data;
  if (d.sentence1_column.empty())
    return Problem{"data.sentence1_column", "empty; name the column of the (first) sentence"};
  if (d.label_column.empty())
    return Problem{"data.label_column", "empty; name the column of the labels"};
  if (d.label_column == d.sentence1_column || d.label_column == d.sentence2_column ||
      d.sentence2_column == d.sentence1_column)
    return Problem{"data.label_column",
                   "data.sentence1_column, data.sentence2_column and data.label_column must "
                   "name different columns",
                   {"data.sentence2_column", "data.sentence1_column"}};
  if (d.regression && !d.labels.empty())
    return Problem{"data.labels",
                   "data.regression reads the label column as numbers: leave data.labels empty",
                   {"data.regression"}};
  if (!d.regression && d.labels.size() < 2)
    return Problem{"data.labels",
                   fmt::format("task classification needs two or more class labels (the values "
                               "of column {}), or data.regression: true; got {}",
                               d.label_column, d.labels.size()),
                   {"data.regression", "task"}};
  for (size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i].empty()) return Problem{"data.labels", "an empty label"};
    for (size_t j = 0; j < i; ++j)
      if (d.labels[j] == d.labels[i])
        return Problem{"data.labels", fmt::format("\"{}\" is listed twice", d.labels[i])};
  }
  const int need = d.sentence2_column.empty() ? 3 : 5;  // [CLS] a [SEP] (b [SEP])
  if (d.seq_len < need)
    return Problem{"data.seq_len",
                   fmt::format("{} tokens cannot hold [CLS] a [SEP]{} with a token of each "
                               "sentence; at least {}",
                               d.seq_len, d.sentence2_column.empty() ? "" : " b [SEP]", need)};
  return std::nullopt;
}

std::optional<Problem> find_problem(const Config& c) {
  const ModelConfig& m = c.model;
  if (m.d_model % m.n_heads != 0)
    return Problem{"model.n_heads",
                   fmt::format("{} heads do not divide model.d_model = {}", m.n_heads, m.d_model),
                   {"model.d_model"}};
  if (m.position == nn::PositionKind::Rope && (m.d_model / m.n_heads) % 2 != 0)
    return Problem{"model.position",
                   fmt::format("rope rotates pairs of features and needs an even head size, but "
                               "d_model / n_heads = {} / {} = {}",
                               m.d_model, m.n_heads, m.d_model / m.n_heads),
                   {"model.d_model", "model.n_heads"}};
  if (c.data.mask_token_prob + c.data.random_token_prob > 1.0 + 1e-12)
    return Problem{"data.random_token_prob",
                   fmt::format("data.mask_token_prob + data.random_token_prob = {} + {} exceeds 1",
                               c.data.mask_token_prob, c.data.random_token_prob),
                   {"data.mask_token_prob"}};
  if (m.position == nn::PositionKind::Learned) {
    if (c.task != Task::Translation && c.data.seq_len > m.max_positions)
      return Problem{"data.seq_len",
                     fmt::format("{} exceeds model.max_positions = {} (learned positions)",
                                 c.data.seq_len, m.max_positions),
                     {"model.max_positions", "model.position"}};
    if (c.task == Task::Translation && c.data.max_len > m.max_positions)
      return Problem{"data.max_len",
                     fmt::format("{} exceeds model.max_positions = {} (learned positions)",
                                 c.data.max_len, m.max_positions),
                     {"model.max_positions", "model.position"}};
  }
  {
    // The size of the model, before anything is allocated: a shape that
    // cannot be held is a config error, not an allocation failure later.
    const double d = m.d_model, ff = m.d_ff, v = c.data.vocab_size, pos = m.max_positions;
    const double enc = m.encoder_layers * (4 * d * d + 2 * d * ff);
    const double dec =
        c.task == Task::Translation ? m.decoder_layers * (8 * d * d + 2 * d * ff) : 0;
    const double params = enc + dec + 2 * v * d + pos * d;
    if (params > 1e11)
      return Problem{
          "model.d_model",
          fmt::format("the model would have about {:.3g} parameters (d_model {}, d_ff "
                      "{}, {} + {} layers, vocabulary {}), more than rotor can hold",
                      params, m.d_model, m.d_ff, m.encoder_layers,
                      c.task == Task::Translation ? m.decoder_layers : 0, c.data.vocab_size),
          {"model.d_ff", "model.encoder_layers", "model.decoder_layers", "data.vocab_size"}};
  }
  if (!m.init_from.empty() && c.task == Task::Translation)
    return Problem{"model.init_from",
                   "initializes a BERT/RoFormer encoder (task mlm or classification); task "
                   "translation has none",
                   {"task"}};
  if (c.task == Task::Classification)
    if (auto p = classification_problem(c)) return p;
  const TrainConfig& t = c.train;
  const auto listed = [&](ValidMetric m) {
    return std::find(t.valid_metrics.begin(), t.valid_metrics.end(), m) != t.valid_metrics.end();
  };
  for (ValidMetric m : {ValidMetric::Bleu, ValidMetric::Chrf})
    if (listed(m) && c.task != Task::Translation)
      return Problem{"train.valid_metrics", fmt::format("{} scores translations; task {} has none",
                                                        to_string(m), to_string(c.task))};
  for (ValidMetric m : t.valid_metrics)
    if (std::string why = metric_unavailable(c, m); !why.empty())
      return Problem{"train.valid_metrics", why};
  if (std::string why = metric_unavailable(c, t.best_metric); !why.empty())
    return Problem{"train.best_metric", why};
  if (t.best_metric != ValidMetric::Loss && !listed(t.best_metric) &&
      !always_reported(c, t.best_metric))
    return Problem{
        "train.best_metric",
        fmt::format("{} is not computed: add it to train.valid_metrics", to_string(t.best_metric)),
        {"train.valid_metrics"}};
  // fp16/bf16 on the CPU are emulated (train/precision.h): allowed.
  return std::nullopt;
}

// ---- the dumper ---------------------------------------------------------------

// The shortest text that reads back exactly, spelled so that YAML 1.1 readers
// (PyYAML) also see a float: always a '.', as in 1.0e-05 and 10000.0.
std::string yaml_float(double v) {
  char buf[32];
  std::string s(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  if (s.find_first_of(".eE") == std::string::npos) return s + ".0";
  size_t e = s.find_first_of("eE");
  if (e != std::string::npos && s.find('.') == std::string::npos) s.insert(e, ".0");
  return s;
}

class Dumper {
 public:
  std::string text;

  template <class T>
  void integer(const char* name, const T& v, const IntRange&) {
    line(name, std::to_string(v));
  }
  void floating(const char* name, const double& v, const FloatRange&) { line(name, yaml_float(v)); }
  void float_pair(const char* name, const std::array<double, 2>& v, const FloatRange&) {
    line(name, "[" + yaml_float(v[0]) + ", " + yaml_float(v[1]) + "]");
  }
  void boolean(const char* name, const bool& v) { line(name, v ? "true" : "false"); }
  // Double-quoted: JSON's escapes are a subset of YAML's, and nothing quoted
  // is mistaken for a number, a boolean or null.
  void string(const char* name, const std::string& v) { line(name, json_quote(v)); }
  void device(const char* name, const std::string& v) { line(name, v); }
  template <ConfigEnum E>
  void enumeration(const char* name, const E& v) {
    line(name, std::string(to_string(v)));
  }
  void string_list(const char* name, const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_quote(v[i]);
    line(name, s + "]");
  }
  template <ConfigEnum E>
  void enum_list(const char* name, const std::vector<E>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(to_string(v[i]));
    line(name, s + "]");
  }
  template <class F>
  void section(const char* name, F&& fill) {
    text += std::string(static_cast<size_t>(2 * depth_), ' ') + name + ":\n";
    ++depth_;
    fill();
    --depth_;
  }

 private:
  void line(const char* name, const std::string& value) {
    text += std::string(static_cast<size_t>(2 * depth_), ' ') + name + ": " + value + "\n";
  }
  int depth_ = 0;
};

}  // namespace

Config load_config_from_string(const std::string& text, const std::string& origin,
                               const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
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
  if (auto p = find_problem(config)) {
    std::vector<std::string> paths{p->path};
    paths.insert(paths.end(), p->related.begin(), p->related.end());
    ROTOR_FAIL("{}: {}: {}", loader.location_of_any(paths), p->path, p->message);
  }
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    ROTOR_FAIL("config file: {}", e.what());
  }
  return load_config_from_string(text, path, overrides);
}

std::string dump_config(const Config& config) {
  Dumper d;
  d.text = "# rotor config, fully resolved (every key, defaults included)\n";
  visit_config(config, d);
  return d.text;
}

void validate(const Config& config) {
  if (auto p = find_problem(config)) ROTOR_FAIL("{}: {}", p->path, p->message);
}

void validate_for_training(const Config& config) {
  validate(config);
  if (config.output_dir.empty())
    ROTOR_FAIL("output_dir: empty; name the directory the run writes into");
  if (config.data.train.empty())
    ROTOR_FAIL(
        "data.train: required for training (a text prefix, or a prefix prepared by `rotor "
        "prepare`)");
}

}  // namespace rotor
