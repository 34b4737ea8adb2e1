// Config to YAML: every key of the schema (config/schema.h), defaults
// included, in a form load_config reads back to an equal Config.
#include <charconv>
#include <string>

#include "config/schema.h"
#include "core/io.h"

namespace rotor {
namespace {

using namespace config_detail;

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
  // A deprecated spelling is read, never written (its new key is).
  void deprecated_floating(const char*, const char*, const double&, const FloatRange&) {}
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

std::string dump_config(const Config& config) {
  Dumper d;
  d.text = std::string(kResolvedConfigHeader) + "\n";
  visit_config(config, d);
  return d.text;
}

}  // namespace rotor
