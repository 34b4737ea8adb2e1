// --set KEY=VALUE: an override edits the YAML tree before it is converted, so
// that it is checked exactly as a key of the file is.
#include "config/loading.h"
#include "core/error.h"

namespace rotor::config_detail {

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

}  // namespace rotor::config_detail
