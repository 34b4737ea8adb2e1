// The JSON value, parser and dumper (src/core/json.h).
#include <cmath>

#include "core/error.h"
#include "core/json.h"
#include "support/test_util.h"

namespace rotor::json {
namespace {

std::string parse_error(std::string_view text) {
  try {
    parse(text, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return "";
}

TEST(Json, ParsesEveryType) {
  Value v = parse(R"( {"n": null, "t": true, "f": false, "i": -42, "d": 2.5e-3,
                       "s": "a\"b\\c\n\u00e9\ud83d\ude00", "a": [1, [2, {}], []], "o": {"x": {}}} )");
  ASSERT_TRUE(v.is_object());
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_TRUE(v.at("t").as_bool());
  EXPECT_FALSE(v.at("f").as_bool());
  EXPECT_EQ(v.at("i").as_int(), -42);
  EXPECT_TRUE(v.at("i").is_integer());
  EXPECT_DOUBLE_EQ(v.at("d").as_double(), 2.5e-3);
  EXPECT_FALSE(v.at("d").is_integer());
  EXPECT_EQ(v.at("s").as_string(), "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.at("a").size(), 3u);
  EXPECT_EQ(v.at("a").at(size_t{1}).at(size_t{0}).as_int(), 2);
  EXPECT_TRUE(v.at("o").at("x").is_object());
}

TEST(Json, ObjectsKeepInsertionOrder) {
  Value v = parse(R"({"z": 1, "a": 2, "m": 3})");
  std::vector<std::string> keys;
  for (const auto& [k, _] : v.as_object()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(v.dump(), R"({"z":1,"a":2,"m":3})");
  Value o;
  o["b"] = 1;
  o["a"] = 2;
  o.set("b", 3);  // replaced in place
  EXPECT_EQ(o.dump(), R"({"b":3,"a":2})");
}

TEST(Json, DumpRoundTrips) {
  Value v = Value::object();
  v.set("int", int64_t{9007199254740993});  // not representable as a double
  v.set("big", uint64_t{18446744073709551615ull});
  v.set("pi", 3.141592653589793);
  v.set("tiny", 1e-300);
  v.set("f", 0.1f);
  v.set("str", "tab\there \x01 \"q\" \xe2\x82\xac");
  Value arr;
  arr.push_back(true);
  arr.push_back(nullptr);
  arr.push_back(Value::array());
  v.set("arr", arr);
  for (int indent : {-1, 0, 2}) {
    Value back = parse(v.dump(indent));
    EXPECT_EQ(back, v) << v.dump(indent);
    EXPECT_EQ(back.dump(), v.dump());
  }
  EXPECT_EQ(parse(v.dump()).at("int").as_int(), 9007199254740993);
  EXPECT_EQ(Value(1.0).dump(), "1");
  EXPECT_EQ(Value(0.1).dump(), "0.1");
  EXPECT_EQ(Value(0.1f).dump(), "0.10000000149011612");  // a float widened to double
  EXPECT_EQ(format_number(0.1f), "0.1");
  EXPECT_EQ(parse("[1,2]").dump(2), "[\n  1,\n  2\n]");
}

TEST(Json, NonFiniteNumbersAsPythonWritesThem) {
  Value v = parse("[NaN, Infinity, -Infinity]");
  EXPECT_TRUE(std::isnan(v.at(size_t{0}).as_double()));
  EXPECT_EQ(v.at(size_t{1}).as_double(), INFINITY);
  EXPECT_EQ(v.at(size_t{2}).as_double(), -INFINITY);
  EXPECT_EQ(v.dump(), "[NaN,Infinity,-Infinity]");
}

TEST(Json, ErrorsNameLineAndColumn) {
  EXPECT_NE(parse_error("{\n  \"a\": 1,\n  \"b\": tru\n}").find("t.json:3:8:"), std::string::npos);
  EXPECT_NE(parse_error("[1, 2").find("t.json:1:6: unexpected end of input"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\": 1,}").find("t.json:1:9:"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\": 1} x").find("t.json:1:10: unexpected text after"),
            std::string::npos);
  EXPECT_NE(parse_error("{\"a\": 1, \"a\": 2}").find("t.json:1:10: duplicate key \"a\""),
            std::string::npos);
  EXPECT_NE(parse_error("\"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("\"a\nb\"").find("control character"), std::string::npos);
  EXPECT_NE(parse_error("\"\\x\"").find("invalid escape"), std::string::npos);
  EXPECT_NE(parse_error("\"\\ud800\"").find("unpaired surrogate"), std::string::npos);
  EXPECT_NE(parse_error("\"\xff\"").find("invalid UTF-8"), std::string::npos);
  EXPECT_NE(parse_error("01").find("leading zero"), std::string::npos);
  EXPECT_NE(parse_error("1.").find("digit after '.'"), std::string::npos);
  EXPECT_NE(parse_error("-").find("expected a digit"), std::string::npos);
  EXPECT_NE(parse_error("").find("empty document"), std::string::npos);
  EXPECT_NE(parse_error("{'a': 1}").find("expected a string key"), std::string::npos);
  EXPECT_NE(parse_error(std::string(100000, '[')).find("nesting deeper"), std::string::npos);
}

TEST(Json, TypedAccessErrors) {
  Value v = parse(R"({"a": "x", "b": 1.5})");
  EXPECT_THROW(v.at("a").as_int(), Error);
  EXPECT_THROW(v.at("b").as_int(), Error);
  EXPECT_THROW(v.at("missing"), Error);
  EXPECT_THROW(v.at(size_t{0}), Error);
  EXPECT_EQ(v.find("missing"), nullptr);
  try {
    v.at("a").as_bool();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "expected a boolean, got a string");
  }
}

TEST(Json, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
}

}  // namespace
}  // namespace rotor::json
