// JSON with rotor's errors (src/core/json_io.h): parse and type errors name the
// document, position and key in rotor's words; nesting and repeated keys are
// rejected; doubles and integers round-trip exactly; objects keep their order.
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/json_io.h"
#include "support/test_util.h"

namespace rotor::json_io {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no rotor::Error";
  return "";
}

std::string parse_error(std::string_view text, int max_depth = kMaxDepth) {
  return error_of([&] { (void)parse(text, "t.json", max_depth); });
}

// One line, rotor's wording, nothing of nlohmann's exception text.
void expect_rotor_message(const std::string& msg) {
  EXPECT_EQ(msg.rfind("t.json", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("syntax error while parsing"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("last read"), std::string::npos) << msg;
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST(Json, SyntaxErrorsNameTheDocumentLineAndColumn) {
  const std::string cases[][2] = {
      {"{\n  \"a\": 1,\n  \"b\": tru\n}", "t.json:3:"},
      {"[1, 2", "t.json:1:6: not valid JSON: unexpected end of input; expected ']'"},
      {"{\"a\": 1,}", "t.json:1:9: not valid JSON: unexpected '}'"},
      {"{\"a\": 1} x", "t.json:1:10: not valid JSON:"},
      {"\"abc", "missing closing quote"},
      {"\"a\nb\"", "control character"},
      {"\"\\x\"", "after backslash"},
      {"\"\\ud800\"", "surrogate"},
      {"\"\xff\"", "UTF-8"},
      {"01", "t.json:1:2: not valid JSON:"},
      {"1.", "expected digit after '.'"},
      {"", "t.json:1:1: not valid JSON: unexpected end of input"},
      {"{'a': 1}", "t.json:1:2:"},
      {"NaN", "t.json:1:1: not valid JSON:"},  // Python's extension, not JSON
      {"[1e400]", "t.json: not valid JSON: number overflow"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string msg = parse_error(text);
    EXPECT_HAS(msg, expected);
    expect_rotor_message(msg);
  }
  // The input read so far is not quoted back: a corrupt file can be large.
  const std::string msg = parse_error("\"" + std::string(100000, 'a'));
  EXPECT_LT(msg.size(), 300u) << msg.substr(0, 300);
  expect_rotor_message(msg);
}

TEST(Json, RepeatedKeysAreRejectedPerObject) {
  std::string msg = parse_error(R"({"a": 1, "b": {"a": 2, "a": 3}})");
  EXPECT_HAS(msg, "t.json: not valid JSON: duplicate key \"a\"");
  expect_rotor_message(msg);
  EXPECT_HAS(parse_error(R"({"a": 1, "a": 1})"), "duplicate key \"a\"");
  // The same key in sibling and nested objects is fine.
  const Json v = parse(R"({"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]})", "t.json");
  EXPECT_EQ(v["b"][1]["a"].get<int>(), 3);
}

TEST(Json, NestingIsBounded) {
  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  EXPECT_NO_THROW((void)parse(nested(kMaxDepth), "t.json"));
  std::string msg = parse_error(nested(kMaxDepth + 1));
  EXPECT_HAS(msg, "t.json: not valid JSON: nesting deeper than 64 levels");
  expect_rotor_message(msg);
  // A hostile document fails as it is read, before it is built.
  EXPECT_HAS(parse_error(std::string(1000000, '[')), "nesting deeper");
  EXPECT_HAS(parse_error(std::string(1000000, '{')), "t.json:1:2:");  // an object needs a key
  // A caller's own bound: safetensors needs 3 levels.
  EXPECT_NO_THROW((void)parse(R"({"t": {"shape": [2, 3]}})", "t.json", 3));
  EXPECT_HAS(parse_error(R"({"t": {"shape": [[2], 3]}})", 3), "nesting deeper than 3 levels");
  EXPECT_HAS(parse_error("[1]", 0), "nesting deeper than 0 levels");
  EXPECT_EQ(parse("7", "t.json", 0).get<int>(), 7);
}

TEST(Json, TypedAccessNamesTheDocumentAndKey) {
  const Json v = parse(R"({"s": "x", "f": 1.5, "i": 7, "two": 2.0, "neg": -3, "b": true,
                           "big": 18446744073709551615, "n": null})",
                       "t.json");
  EXPECT_EQ(get_int(v, "i", "t.json"), 7);
  EXPECT_EQ(get_int(v, "neg", "t.json"), -3);
  EXPECT_EQ(get_int(v, "two", "t.json"), 2);  // an integral double
  EXPECT_EQ(get_double(v, "i", "t.json"), 7.0);
  EXPECT_EQ(get_double(v, "f", "t.json"), 1.5);
  EXPECT_EQ(get_string(v, "s", "t.json"), "x");
  EXPECT_TRUE(get_bool(v, "b", "t.json"));
  EXPECT_EQ(get_int(v, "absent", "t.json", 42), 42);
  EXPECT_EQ(get_int(v, "i", "t.json", 42), 7);

  auto msg = [&](auto f) { return error_of([&] { (void)f(); }); };
  EXPECT_EQ(msg([&] { return get_int(v, "s", "t.json"); }),
            "t.json: \"s\" is a string, expected an integer");
  EXPECT_EQ(msg([&] { return get_int(v, "f", "t.json"); }),
            "t.json: \"f\" is 1.5, expected an integer");
  EXPECT_EQ(msg([&] { return get_int(v, "big", "t.json"); }),
            "t.json: \"big\" is 18446744073709551615, too large for a 64-bit integer");
  EXPECT_EQ(msg([&] { return get_double(v, "n", "t.json"); }),
            "t.json: \"n\" is null, expected a number");
  EXPECT_EQ(msg([&] { return get_string(v, "i", "t.json"); }),
            "t.json: \"i\" is a number, expected a string");
  EXPECT_EQ(msg([&] { return get_bool(v, "s", "t.json"); }),
            "t.json: \"s\" is a string, expected a boolean");
  EXPECT_EQ(msg([&] { return get_int(v, "missing", "t.json"); }),
            "t.json: missing key \"missing\"");
  // A fallback covers an absent key, not a wrong type.
  EXPECT_EQ(msg([&] { return get_int(v, "s", "t.json", 0); }),
            "t.json: \"s\" is a string, expected an integer");
  const Json arr = parse("[1]", "t.json");
  EXPECT_EQ(msg([&] { return get_int(arr, "i", "t.json"); }),
            "t.json: expected a JSON object, got an array");
  EXPECT_EQ(msg([&] { return get_int(arr, "i", "t.json", 0); }),
            "t.json: expected a JSON object, got an array");
}

TEST(Json, LoadNamesTheFile) {
  test::TempDir tmp;
  const std::string path = tmp / "state.json";
  std::ofstream(path) << R"({"step": 12, "loss_scale": "big"})";
  const Json v = load(path);
  EXPECT_EQ(get_int(v, "step", path), 12);
  EXPECT_EQ(error_of([&] { (void)get_double(v, "loss_scale", path); }),
            path + ": \"loss_scale\" is a string, expected a number");
  std::ofstream(path, std::ios::trunc) << R"({"step": 12, "loss)";  // truncated
  const std::string msg = error_of([&] { (void)load(path); });
  EXPECT_EQ(msg.rfind(path + ":1:", 0), 0u) << msg;
  EXPECT_HAS(msg, "not valid JSON");
  EXPECT_HAS(error_of([&] { (void)load(tmp / "missing.json"); }), "missing.json");
}

TEST(Json, DoublesRoundTripBitwise) {
  std::vector<double> values = {0.1,
                                1.0 / 3.0,
                                1024.0,
                                2.0e-3,
                                -0.0,
                                1e-300,
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::max(),
                                -std::numeric_limits<double>::max(),
                                9007199254740993.0,
                                123456789.123456789};
  std::mt19937_64 gen(5);
  while (values.size() < 20000) {
    const double d = std::bit_cast<double>(gen());
    if (std::isfinite(d)) values.push_back(d);
  }
  Json arr = Json::array();
  for (double d : values) arr.push_back(d);
  for (int indent : {-1, 2}) {
    const Json back = parse(arr.dump(indent), "t.json");
    ASSERT_EQ(back.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_TRUE(back[i].is_number_float()) << arr[i].dump();  // a double stays a double
      const double d = back[i].get<double>();
      ASSERT_EQ(std::bit_cast<uint64_t>(d), std::bit_cast<uint64_t>(values[i])) << arr[i].dump();
    }
  }
  EXPECT_EQ(Json(1.0).dump(), "1.0");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(std::nan("")).dump(), "null");  // JSON has no NaN
}

TEST(Json, IntegersStayIntegers) {
  Json v = Json::object();
  v["min"] = std::numeric_limits<int64_t>::min();
  v["max"] = std::numeric_limits<int64_t>::max();
  v["umax"] = std::numeric_limits<uint64_t>::max();
  v["odd"] = int64_t{9007199254740993};  // not a double
  EXPECT_EQ(v.dump(), R"({"min":-9223372036854775808,"max":9223372036854775807,)"
                      R"("umax":18446744073709551615,"odd":9007199254740993})");
  const Json back = parse(v.dump(), "t.json");
  EXPECT_EQ(get_int(back, "min", "t.json"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(get_int(back, "max", "t.json"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(back["umax"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(get_int(back, "odd", "t.json"), 9007199254740993);
  EXPECT_TRUE(back["odd"].is_number_integer());
}

TEST(Json, FloatsAreWrittenAsTheFloatTheyAre) {
  EXPECT_EQ(Json(0.1f).dump(), "0.10000000149011612");  // widened
  EXPECT_EQ(Json(shortest_decimal(0.1f)).dump(), "0.1");
  EXPECT_EQ(Json(shortest_decimal(2.345678f)).dump(), "2.345678");
  EXPECT_TRUE(std::isinf(shortest_decimal(std::numeric_limits<float>::infinity())));
  std::mt19937 gen(3);
  for (int i = 0; i < 20000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(gen()));
    if (!std::isfinite(f)) continue;
    const double back = parse(Json(shortest_decimal(f)).dump(), "t.json").get<double>();
    ASSERT_EQ(std::bit_cast<uint32_t>(static_cast<float>(back)), std::bit_cast<uint32_t>(f)) << f;
  }
}

TEST(Json, ObjectsKeepTheirOrder) {
  const Json v = parse(R"({"z": 1, "a": 2, "m": 3})", "t.json");
  EXPECT_EQ(v.dump(), R"({"z":1,"a":2,"m":3})");
  Json o = Json::object();
  o["b"] = 1;
  o["a"] = 2;
  o["b"] = 3;  // replaced in place
  EXPECT_EQ(o.dump(), R"({"b":3,"a":2})");
  EXPECT_EQ(parse("[1,2]", "t.json").dump(2), "[\n  1,\n  2\n]");
}

TEST(Json, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("ok\xff"));
}

}  // namespace
}  // namespace rotor::json_io
