#include "core/json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/io.h"

namespace rotor::json {

const char* type_name(Type t) {
  switch (t) {
    case Type::Null:
      return "null";
    case Type::Bool:
      return "a boolean";
    case Type::Number:
      return "a number";
    case Type::String:
      return "a string";
    case Type::Array:
      return "an array";
    case Type::Object:
      return "an object";
  }
  return "?";
}

// ---- Value ------------------------------------------------------------------

Type Value::type() const {
  switch (v_.index()) {
    case 0:
      return Type::Null;
    case 1:
      return Type::Bool;
    case 2:
    case 3:
      return Type::Number;
    case 4:
      return Type::String;
    case 5:
      return Type::Array;
    default:
      return Type::Object;
  }
}

namespace {
[[noreturn]] void wrong_type(const char* expected, Type got) {
  ROTOR_FAIL("expected {}, got {}", expected, type_name(got));
}
}  // namespace

bool Value::is_integer() const {
  if (std::holds_alternative<int64_t>(v_)) return true;
  if (const double* d = std::get_if<double>(&v_))
    return std::isfinite(*d) && std::floor(*d) == *d && *d >= -9223372036854775808.0 &&
           *d < 9223372036854775808.0;
  return false;
}

bool Value::as_bool() const {
  if (const bool* b = std::get_if<bool>(&v_)) return *b;
  wrong_type("a boolean", type());
}

double Value::as_double() const {
  if (const int64_t* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  if (const double* d = std::get_if<double>(&v_)) return *d;
  wrong_type("a number", type());
}

int64_t Value::as_int() const {
  if (const int64_t* i = std::get_if<int64_t>(&v_)) return *i;
  if (const double* d = std::get_if<double>(&v_)) {
    if (!is_integer()) ROTOR_FAIL("expected an integer, got {}", format_number(*d));
    return static_cast<int64_t>(*d);
  }
  wrong_type("an integer", type());
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&v_)) return *s;
  wrong_type("a string", type());
}

const Array& Value::as_array() const {
  if (const auto* a = std::get_if<Array>(&v_)) return *a;
  wrong_type("an array", type());
}
Array& Value::as_array() {
  if (auto* a = std::get_if<Array>(&v_)) return *a;
  wrong_type("an array", type());
}
const Object& Value::as_object() const {
  if (const auto* o = std::get_if<Object>(&v_)) return *o;
  wrong_type("an object", type());
}
Object& Value::as_object() {
  if (auto* o = std::get_if<Object>(&v_)) return *o;
  wrong_type("an object", type());
}

const Value* Value::find(std::string_view key) const {
  const auto* o = std::get_if<Object>(&v_);
  if (!o) return nullptr;
  for (const auto& [k, v] : *o)
    if (k == key) return &v;
  return nullptr;
}
Value* Value::find(std::string_view key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->find(key));
}

const Value& Value::at(std::string_view key) const {
  (void)as_object();  // the type check
  const Value* found = find(key);
  if (!found) ROTOR_FAIL("missing key {}", json_quote(key));
  return *found;
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) v_ = Object{};
  Object& o = as_object();
  for (auto& [k, v] : o)
    if (k == key) return v;
  o.emplace_back(std::string(key), Value());
  return o.back().second;
}

Value& Value::set(std::string_view key, Value v) {
  return (*this)[key] = std::move(v);
}

const Value& Value::at(size_t i) const {
  const Array& a = as_array();
  if (i >= a.size()) ROTOR_FAIL("index {} out of range for an array of {} elements", i, a.size());
  return a[i];
}

void Value::push_back(Value v) {
  if (is_null()) v_ = Array{};
  as_array().push_back(std::move(v));
}

size_t Value::size() const {
  if (const auto* a = std::get_if<Array>(&v_)) return a->size();
  if (const auto* o = std::get_if<Object>(&v_)) return o->size();
  return 0;
}

bool Value::operator==(const Value& other) const {
  if (is_number() && other.is_number()) {
    const int64_t* a = std::get_if<int64_t>(&v_);
    const int64_t* b = std::get_if<int64_t>(&other.v_);
    if (a && b) return *a == *b;
    return as_double() == other.as_double();
  }
  return v_ == other.v_;
}

// ---- dump -----------------------------------------------------------------

std::string format_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, res.ptr);
}

std::string format_number(float f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, res.ptr);
}

namespace {
void newline(std::string& out, int indent, int depth) {
  out.push_back('\n');
  out.append(static_cast<size_t>(indent * depth), ' ');
}
}  // namespace

void Value::dump_to(std::string& out, int indent, int depth) const {
  switch (v_.index()) {
    case 0:
      out += "null";
      break;
    case 1:
      out += std::get<bool>(v_) ? "true" : "false";
      break;
    case 2:
      out += std::to_string(std::get<int64_t>(v_));
      break;
    case 3:
      out += format_number(std::get<double>(v_));
      break;
    case 4:
      out += json_quote(std::get<std::string>(v_));
      break;
    case 5: {
      const Array& a = std::get<Array>(v_);
      out.push_back('[');
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out.push_back(',');
        if (indent >= 0) newline(out, indent, depth + 1);
        a[i].dump_to(out, indent, depth + 1);
      }
      if (indent >= 0 && !a.empty()) newline(out, indent, depth);
      out.push_back(']');
      break;
    }
    default: {
      const Object& o = std::get<Object>(v_);
      out.push_back('{');
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out.push_back(',');
        if (indent >= 0) newline(out, indent, depth + 1);
        out += json_quote(o[i].first);
        out += indent >= 0 ? ": " : ":";
        o[i].second.dump_to(out, indent, depth + 1);
      }
      if (indent >= 0 && !o.empty()) newline(out, indent, depth);
      out.push_back('}');
    }
  }
}

std::string Value::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

// ---- UTF-8 ------------------------------------------------------------------

namespace {
// Length of the well-formed UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0)
    n = 2, cp = c & 0x1f;
  else if ((c & 0xf0) == 0xe0)
    n = 3, cp = c & 0x0f;
  else if ((c & 0xf8) == 0xf0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}
}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// ---- parse ------------------------------------------------------------------

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view origin) : s_(text), origin_(origin) {}

  Value document() {
    skip_ws();
    if (pos_ == s_.size()) fail("empty document, expected a JSON value");
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n')
        ++line, col = 1;
      else
        ++col;
    }
    ROTOR_FAIL("{}:{}:{}: {}", origin_, line, col, what);
  }

  std::string describe_here() const {
    if (pos_ >= s_.size()) return "end of input";
    char c = s_[pos_];
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return fmt::format("byte 0x{:02x}", static_cast<unsigned char>(c));
    return fmt::format("'{}'", c);
  }

  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool consume_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 512 levels");
    if (pos_ >= s_.size()) fail("unexpected end of input, expected a value");
    char c = s_[pos_];
    switch (c) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return Value(string());
      case 't':
        if (consume_word("true")) return Value(true);
        break;
      case 'f':
        if (consume_word("false")) return Value(false);
        break;
      case 'n':
        if (consume_word("null")) return Value();
        break;
      case 'N':
        if (consume_word("NaN")) return Value(std::numeric_limits<double>::quiet_NaN());
        break;
      case 'I':
        if (consume_word("Infinity")) return Value(std::numeric_limits<double>::infinity());
        break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
    }
    fail(fmt::format("unexpected {}, expected a value", describe_here()));
  }

  Value object(int depth) {
    ++pos_;  // {
    Value out = Value::object();
    Object& o = out.as_object();
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return out;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"')
        fail(fmt::format("unexpected {}, expected a string key", describe_here()));
      size_t key_pos = pos_;
      std::string key = string();
      for (const auto& m : o)
        if (m.first == key) fail_at(key_pos, fmt::format("duplicate key {}", json_quote(key)));
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':')
        fail(fmt::format("unexpected {}, expected ':'", describe_here()));
      ++pos_;
      skip_ws();
      o.emplace_back(std::move(key), value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return out;
      }
      fail(fmt::format("unexpected {}, expected ',' or '}}'", describe_here()));
    }
  }

  Value array(int depth) {
    ++pos_;  // [
    Value out = Value::array();
    Array& a = out.as_array();
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return out;
    }
    for (;;) {
      skip_ws();
      a.push_back(value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return out;
      }
      fail(fmt::format("unexpected {}, expected ',' or ']'", describe_here()));
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else {
        --pos_;
        fail("invalid hex digit in \\u escape");
      }
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  std::string string() {
    size_t start = pos_;
    ++pos_;  // "
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail_at(start, "unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in string (escape it)");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= s_.size()) fail_at(start, "unterminated string");
        char e = s_[pos_++];
        switch (e) {
          case '"':
            out.push_back('"');
            break;
          case '\\':
            out.push_back('\\');
            break;
          case '/':
            out.push_back('/');
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case 'n':
            out.push_back('\n');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'u': {
            size_t esc = pos_ - 2;
            uint32_t cp = hex4();
            if (cp >= 0xd800 && cp <= 0xdbff) {
              if (s_.substr(pos_, 2) != "\\u") fail_at(esc, "unpaired surrogate in \\u escape");
              pos_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xdc00 || lo > 0xdfff) fail_at(esc, "unpaired surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
              fail_at(esc, "unpaired surrogate in \\u escape");
            }
            append_utf8(out, cp);
            break;
          }
          default:
            pos_ -= 2;
            fail(fmt::format("invalid escape '\\{}'", e));
        }
        continue;
      }
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      size_t n = utf8_sequence_length(s_, pos_);
      if (n == 0) fail("invalid UTF-8 in string");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  Value number() {
    size_t start = pos_;
    if (s_[pos_] == '-') {
      ++pos_;
      if (consume_word("Infinity")) return Value(-std::numeric_limits<double>::infinity());
    }
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9'))
      fail("invalid number: expected a digit");
    if (s_[pos_] == '0') {
      ++pos_;
      if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
        fail_at(start, "invalid number: leading zero");
    } else {
      digits();
    }
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) fail("invalid number: expected a digit after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      integral = false;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("invalid number: expected a digit in the exponent");
    }
    std::string_view text = s_.substr(start, pos_ - start);
    if (integral) {
      int64_t i = 0;
      auto r = std::from_chars(text.data(), text.data() + text.size(), i);
      if (r.ec == std::errc() && r.ptr == text.data() + text.size()) return Value(i);
    }
    double d = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow to +-inf or underflow to 0, as other parsers do.
      d = std::strtod(std::string(text).c_str(), nullptr);
    } else if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
      fail_at(start, "invalid number");
    }
    return Value(d);
  }

  std::string_view s_;
  std::string_view origin_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view origin) {
  return Parser(text, origin).document();
}

}  // namespace rotor::json
