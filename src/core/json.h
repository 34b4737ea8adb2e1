// A small JSON value with insertion-ordered objects, a strict parser that
// reports line and column, and a dumper. Used for safetensors headers, the
// trainer state and Hugging Face config.json export.
//
// Numbers keep an exact int64 when the literal is an integer that fits, else a
// double. As Python's json module does, NaN, Infinity and -Infinity are
// written for non-finite numbers and accepted when parsing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace rotor::json {

class Value;
using Array = std::vector<Value>;
using Member = std::pair<std::string, Value>;
using Object = std::vector<Member>;  // in insertion order; keys are unique

enum class Type { Null, Bool, Number, String, Array, Object };
const char* type_name(Type t);  // "null", "a boolean", "a number", ...

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Value(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t)) {
      if (i > static_cast<I>(INT64_MAX)) {
        v_ = static_cast<double>(i);
        return;
      }
    }
    v_ = static_cast<int64_t>(i);
  }
  Value(double d) : v_(d) {}
  Value(float f) : v_(static_cast<double>(f)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  static Value array() { return Value(Array{}); }
  static Value object() { return Value(Object{}); }

  Type type() const;
  bool is_null() const { return type() == Type::Null; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_number() const { return type() == Type::Number; }
  bool is_integer() const;  // a number with an integral value that fits int64
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }
  bool is_object() const { return type() == Type::Object; }

  // Typed access; the wrong type is a rotor::Error ("expected a string, got a number").
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;  // integral numbers only (3.0 is fine, 3.5 is not)
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Objects. find() returns nullptr when absent; at() throws a rotor::Error
  // naming the key; operator[] inserts null when absent (a null Value becomes
  // an object first); set() inserts or replaces, keeping the original position.
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Value& at(std::string_view key) const;
  Value& operator[](std::string_view key);
  Value& set(std::string_view key, Value v);

  // Arrays (a null Value becomes an array first).
  const Value& at(size_t i) const;
  void push_back(Value v);

  size_t size() const;  // elements of an array or members of an object, else 0

  // Compact JSON when indent < 0, else pretty with `indent` spaces per level.
  std::string dump(int indent = -1) const;

  bool operator==(const Value& other) const;

 private:
  void dump_to(std::string& out, int indent, int depth) const;
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> v_{nullptr};
};

// Parses one JSON document (whitespace around it allowed, nothing else).
// Errors are rotor::Error "ORIGIN:LINE:COLUMN: what is wrong".
Value parse(std::string_view text, std::string_view origin = "<json>");

// The shortest decimal text that reads back as exactly `d` ("NaN",
// "Infinity", "-Infinity" for non-finite values).
std::string format_number(double d);
// The same for a float: the shortest text that reads back as the float.
std::string format_number(float f);

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace rotor::json
