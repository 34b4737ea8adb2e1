// JSON through nlohmann::json (Debian's nlohmann-json3-dev), with rotor's
// errors at the boundary: a syntax error, a repeated key, nesting too deep, a
// missing key or a value of the wrong type is one rotor::Error line naming the
// document (a file path) and, for typed access, the key.
//
// rotor writes Json (nlohmann::ordered_json): objects keep the order in which
// keys were set, so files list them as the code writes them. nlohmann prints a
// double as a short text that reads back exactly and always as a double (1.0,
// not 1), an integer as an integer; a non-finite double is written as null
// (JSON has no NaN).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace rotor::json_io {

using Json = nlohmann::ordered_json;

// Deeper than any document rotor reads: more is a broken or hostile file.
constexpr int kMaxDepth = 64;

// Parses one JSON document (whitespace around it allowed, nothing else).
// Errors: "ORIGIN:LINE:COLUMN: not valid JSON: what is wrong", and
// "ORIGIN: not valid JSON: ..." for a key repeated in an object or nesting
// deeper than max_depth levels (a top-level scalar is level 0, the top-level
// object or array level 1). The depth is checked as the text is read, so a
// hostile document fails before it is built.
Json parse(std::string_view text, std::string_view origin, int max_depth = kMaxDepth);

// The largest JSON file load() reads (256 MiB): configs, indexes and trainer
// states are far smaller, and a bound keeps a wrong file from filling memory.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;

// Reads the file at `path` (a regular file of at most kMaxJsonFileBytes) and
// parses it; errors name the path.
Json load(const std::string& path, int max_depth = kMaxDepth);

// "null", "a boolean", "a number", "a string", "an array", "an object".
const char* type_name(const Json& v);

// Typed values; `what` names the value in the error: 'WHAT is a string,
// expected an integer'. as_int takes integral numbers only (2.0 reads as 2,
// 2.5 is an error); as_double any number.
bool as_bool(const Json& v, std::string_view what);
int64_t as_int(const Json& v, std::string_view what);
double as_double(const Json& v, std::string_view what);
const std::string& as_string(const Json& v, std::string_view what);

// Members of the object `object` of the document `origin`. at() fails when
// `object` is not an object or lacks the key ('PATH: missing key "step"');
// get_*() also on the wrong type ('PATH: "step" is a string, expected an
// integer'). The overloads with a fallback return it when the key is absent.
const Json& at(const Json& object, std::string_view key, std::string_view origin);
bool get_bool(const Json& object, std::string_view key, std::string_view origin);
int64_t get_int(const Json& object, std::string_view key, std::string_view origin);
int64_t get_int(const Json& object, std::string_view key, std::string_view origin,
                int64_t fallback);
double get_double(const Json& object, std::string_view key, std::string_view origin);
std::string get_string(const Json& object, std::string_view key, std::string_view origin);

// The double nearest to the shortest decimal text of `f` (2.345678f ->
// 2.345678, where widening gives 2.3450000286102295): what to store so that a
// float is written as the float it is.
double shortest_decimal(float f);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or values
// above U+10FFFF), as Json needs a string to be to write it.
bool is_valid_utf8(std::string_view s);

}  // namespace rotor::json_io
