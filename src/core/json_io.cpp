#include "core/json_io.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/io.h"

namespace rotor::json_io {

namespace {

// nlohmann's message without its tag and position, in rotor's form:
// "[json.exception.parse_error.101] parse error at line 1, column 9: syntax
// error while parsing object key - unexpected '}'; expected string literal"
// -> "unexpected '}'; expected string literal".
std::string describe(std::string_view what) {
  if (size_t tag = what.find("] "); what.starts_with("[json.exception.") && tag != what.npos)
    what.remove_prefix(tag + 2);
  if (what.starts_with("parse error"))
    if (size_t colon = what.find(": "); colon != what.npos) what.remove_prefix(colon + 2);
  if (what.starts_with("syntax error while parsing "))
    if (size_t dash = what.find(" - "); dash != what.npos) what.remove_prefix(dash + 3);
  // "; last read: '...'" quotes the input read so far: in a corrupt file that
  // can be most of the file, and binary. What follows it ("; expected ...") stays.
  std::string out(what);
  if (size_t read = out.find("; last read: '"); read != out.npos) {
    size_t expected = out.rfind("'; expected ");
    out = out.substr(0, read) +
          (expected != out.npos && expected > read ? out.substr(expected + 1) : std::string());
  }
  constexpr size_t kMaxLength = 200;
  if (out.size() > kMaxLength) out = out.substr(0, kMaxLength) + "...";
  return out;
}

// Line and column (from 1) of byte `at` of `text`.
std::pair<size_t, size_t> line_column(std::string_view text, size_t at) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n')
      ++line, column = 1;
    else
      ++column;
  }
  return {line, column};
}

[[noreturn]] void wrong_type(const Json& v, std::string_view what, const char* expected) {
  ROTOR_FAIL("{} is {}, expected {}", what, type_name(v), expected);
}

std::string member_name(std::string_view key, std::string_view origin) {
  return fmt::format("{}: {}", origin, json_quote(key));
}

}  // namespace

Json parse(std::string_view text, std::string_view origin, int max_depth) {
  // The keys of the objects open at this point of the text, innermost last:
  // nlohmann keeps the last of repeated keys, rotor rejects them.
  std::vector<std::unordered_set<std::string>> keys;
  Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        // `depth` counts the containers around this one.
        if (depth >= max_depth)
          ROTOR_FAIL("{}: not valid JSON: nesting deeper than {} levels", origin, max_depth);
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.back().insert(parsed.get_ref<const std::string&>()).second)
          ROTOR_FAIL("{}: not valid JSON: duplicate key {}", origin,
                     json_quote(parsed.get_ref<const std::string&>()));
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.data(), text.data() + text.size(), check);
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included.
    const auto [line, column] = line_column(text, e.byte > 0 ? e.byte - 1 : 0);
    ROTOR_FAIL("{}:{}:{}: not valid JSON: {}", origin, line, column, describe(e.what()));
  } catch (const Json::exception& e) {  // e.g. a number out of the range of a double
    ROTOR_FAIL("{}: not valid JSON: {}", origin, describe(e.what()));
  }
}

Json load(const std::string& path, int max_depth) {
  return parse(read_file(path, kMaxJsonFileBytes), path, max_depth);
}

const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "binary data";
  }
}

bool as_bool(const Json& v, std::string_view what) {
  if (!v.is_boolean()) wrong_type(v, what, "a boolean");
  return v.get<bool>();
}

int64_t as_int(const Json& v, std::string_view what) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      ROTOR_FAIL("{} is {}, too large for a 64-bit integer", what, u);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_float()) {
    // A writer may print an integral double as 2.0.
    const double d = v.get<double>();
    if (std::floor(d) != d || !(d >= -0x1p63 && d < 0x1p63))
      ROTOR_FAIL("{} is {}, expected an integer", what, v.dump());
    return static_cast<int64_t>(d);
  }
  wrong_type(v, what, "an integer");
}

double as_double(const Json& v, std::string_view what) {
  if (!v.is_number()) wrong_type(v, what, "a number");
  return v.get<double>();
}

const std::string& as_string(const Json& v, std::string_view what) {
  if (!v.is_string()) wrong_type(v, what, "a string");
  return v.get_ref<const std::string&>();
}

const Json& at(const Json& object, std::string_view key, std::string_view origin) {
  if (!object.is_object())
    ROTOR_FAIL("{}: expected a JSON object, got {}", origin, type_name(object));
  auto it = object.find(key);
  if (it == object.end()) ROTOR_FAIL("{}: missing key {}", origin, json_quote(key));
  return *it;
}

bool get_bool(const Json& object, std::string_view key, std::string_view origin) {
  return as_bool(at(object, key, origin), member_name(key, origin));
}

int64_t get_int(const Json& object, std::string_view key, std::string_view origin) {
  return as_int(at(object, key, origin), member_name(key, origin));
}

int64_t get_int(const Json& object, std::string_view key, std::string_view origin,
                int64_t fallback) {
  if (object.is_object() && !object.contains(key)) return fallback;
  return get_int(object, key, origin);
}

double get_double(const Json& object, std::string_view key, std::string_view origin) {
  return as_double(at(object, key, origin), member_name(key, origin));
}

std::string get_string(const Json& object, std::string_view key, std::string_view origin) {
  return as_string(at(object, key, origin), member_name(key, origin));
}

double shortest_decimal(float f) {
  if (!std::isfinite(f)) return static_cast<double>(f);
  char buf[32];
  const auto text = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, text.ptr, d);
  return d;
}

bool is_valid_utf8(std::string_view s) {
  // nlohmann's writer validates strings strictly (error 316 otherwise).
  try {
    (void)Json(std::string(s)).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

}  // namespace rotor::json_io
