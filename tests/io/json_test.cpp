// io/json: the strict parser, its error positions, and the writer.

#include "io/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"

namespace reprise::json {
namespace {

// The Error message parse() raises for `text`, or "" when it parses.
std::string parse_error(std::string_view text, ParseOptions options = {}) {
  try {
    parse(text, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Json, Literals) {
  EXPECT_TRUE(parse("null").is_null());
  EXPECT_EQ(parse("true").as_bool(), true);
  EXPECT_EQ(parse(" \t\r\n false \n").as_bool(), false);
}

TEST(Json, IntegersAreExact) {
  EXPECT_EQ(parse("0").as_int(), 0);
  EXPECT_EQ(parse("-0").as_int(), 0);
  EXPECT_EQ(parse("42").as_int(), 42);
  EXPECT_EQ(parse("9223372036854775807").as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  // 2^53 + 1 has no double; an int64 keeps it.
  EXPECT_EQ(parse("9007199254740993").as_int(), 9007199254740993LL);
}

TEST(Json, RealsAndOutOfRangeIntegers) {
  EXPECT_EQ(parse("1.5").kind(), Kind::real);
  EXPECT_EQ(parse("1.5").as_double(), 1.5);
  EXPECT_EQ(parse("1e3").kind(), Kind::real);  // an exponent makes a real
  EXPECT_EQ(parse("1e3").as_double(), 1000.0);
  EXPECT_EQ(parse("1E+2").as_double(), 100.0);
  EXPECT_EQ(parse("-1.25e-2").as_double(), -0.0125);
  EXPECT_EQ(parse("0.1").as_double(), 0.1);
  EXPECT_EQ(parse("4.9406564584124654e-324").as_double(), 4.9406564584124654e-324);
  // Past int64: a double, as other parsers do.
  Value big = parse("9223372036854775808");
  EXPECT_EQ(big.kind(), Kind::real);
  EXPECT_EQ(big.as_double(), 9223372036854775808.0);
  // Underflow reads as a signed zero; overflow has no double.
  EXPECT_EQ(parse("1e-400").as_double(), 0.0);
  EXPECT_TRUE(std::signbit(parse("-1e-400").as_double()));
  EXPECT_EQ(parse("0.0000001e-400").as_double(), 0.0);
  EXPECT_NE(parse_error("1e400").find("within the range of a double"), std::string::npos);
  EXPECT_NE(parse_error("-123.5e99999999999999999999").find("range of a double"),
            std::string::npos);
  EXPECT_EQ(parse("2.5").as_double(), 2.5);
  // as_int does not truncate reals.
  EXPECT_THROW(parse("1.0").as_int(), Error);
}

TEST(Json, StringEscapes) {
  EXPECT_EQ(parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
  // U+1F600 as a surrogate pair, and as raw UTF-8.
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse("\"\xF0\x9F\x98\x80 \xC3\xA9\"").as_string(), "\xF0\x9F\x98\x80 \xC3\xA9");
  // U+10FFFF, the last code point.
  EXPECT_EQ(parse(R"("\udbff\udfff")").as_string(), "\xF4\x8F\xBF\xBF");
}

TEST(Json, BadStrings) {
  EXPECT_NE(parse_error(R"("\ud83d")").find("low surrogate after a high surrogate"),
            std::string::npos);
  EXPECT_NE(parse_error(R"("\ud83d\u0041")").find("a low surrogate (DC00-DFFF)"),
            std::string::npos);
  EXPECT_NE(parse_error(R"("\ude00")").find("a high surrogate"), std::string::npos);
  EXPECT_NE(parse_error(R"("\u12G4")").find("four hex digits"), std::string::npos);
  EXPECT_NE(parse_error(R"("\x")").find("an escape character"), std::string::npos);
  EXPECT_NE(parse_error("\"a\nb\"").find("raw control character"), std::string::npos);
  EXPECT_NE(parse_error("\"abc").find("closing the string"), std::string::npos);
  // Invalid UTF-8: overlong '/', an encoded surrogate, a stray continuation,
  // 0xFF, past U+10FFFF, and a sequence cut short by the closing quote.
  for (const char* bad : {"\"\xC0\xAF\"", "\"\xED\xA0\x80\"", "\"\x80\"", "\"\xFF\"",
                          "\"\xF4\x90\x80\x80\"", "\"\xE2\x82\""}) {
    EXPECT_NE(parse_error(bad).find("valid UTF-8"), std::string::npos) << bad;
  }
}

TEST(Json, ArraysAndObjectsKeepOrder) {
  Value v = parse(R"({"z": [1, 2.5, "x", null, [], {}], "a": {"k": true}, "m": -3})");
  const Object& members = v.as_object();
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].first, "z");
  EXPECT_EQ(members[1].first, "a");
  EXPECT_EQ(members[2].first, "m");
  const Array& z = v.at("z").as_array();
  ASSERT_EQ(z.size(), 6u);
  EXPECT_EQ(z[0].as_int(), 1);
  EXPECT_EQ(z[1].as_double(), 2.5);
  EXPECT_EQ(z[2].as_string(), "x");
  EXPECT_TRUE(z[3].is_null());
  EXPECT_TRUE(z[4].as_array().empty());
  EXPECT_TRUE(z[5].as_object().empty());
  EXPECT_TRUE(v.at("a").at("k").as_bool());
  EXPECT_EQ(v.find("nope"), nullptr);
}

TEST(Json, ErrorsGivePositionAndExpectation) {
  std::string e = parse_error(R"({"a": 1,})");
  EXPECT_NE(e.find("line 1, column 9 (byte 8)"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a string key, found '}'"), std::string::npos) << e;

  e = parse_error("[1,\n 2,\n x]");
  EXPECT_NE(e.find("line 3, column 2"), std::string::npos) << e;
  EXPECT_NE(e.find("found 'x'"), std::string::npos) << e;

  e = parse_error("[1 2]");
  EXPECT_NE(e.find("',' or ']' after an array element"), std::string::npos) << e;
  e = parse_error(R"({"a" 1})");
  EXPECT_NE(e.find("':' after an object key"), std::string::npos) << e;
  e = parse_error(R"({"a": 1 "b": 2})");
  EXPECT_NE(e.find("',' or '}' after an object member"), std::string::npos) << e;
  e = parse_error("[1,");
  EXPECT_NE(e.find("found end of input"), std::string::npos) << e;
  e = parse_error("[\x01]");
  EXPECT_NE(e.find("found byte 0x01"), std::string::npos) << e;
}

TEST(Json, StrictnessRejectsExtensions) {
  for (const char* bad :
       {"",    "   ",      "[1,]",      "01",  "-01",      "1.",        ".5",   "+1",
        "-",   "1e",       "1e+",       "NaN", "Infinity", "-Infinity", "nul",  "tru",
        "'a'", "[1] // c", "/* c */ 1", "1 2", "{} {}",    "{a: 1}",    "[1]]", "\xEF\xBB\xBF{}"}) {
    EXPECT_NE(parse_error(bad), "") << "accepted: " << bad;
  }
}

TEST(Json, DuplicateKeysAreRejected) {
  std::string e = parse_error(R"({"w": 1, "b": 2, "w": 3})");
  EXPECT_NE(e.find("duplicate key \"w\""), std::string::npos) << e;
  EXPECT_NE(e.find("column 18"), std::string::npos) << e;  // at the second "w"
  // The same key in different objects is fine.
  EXPECT_EQ(parse_error(R"({"a": {"w": 1}, "b": {"w": 2}})"), "");
}

TEST(Json, DepthLimit) {
  auto nested = [](int depth) {
    return std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
  };
  EXPECT_EQ(parse_error(nested(128)), "");
  EXPECT_NE(parse_error(nested(129)).find("no deeper than 128"), std::string::npos);
  EXPECT_NE(parse_error(R"({"a": {"b": {}}})", {.max_depth = 2}).find("no deeper than 2"),
            std::string::npos);
  EXPECT_EQ(parse_error(R"({"a": {"b": 1}})", {.max_depth = 2}), "");
  // A deep document fails cleanly instead of overflowing the stack.
  EXPECT_NE(parse_error(std::string(100000, '[')), "");
}

TEST(Json, DumpCompactAndPretty) {
  Value v{Object{{"name", Value("w\"1\n")},
                 {"shape", Value(Array{Value(2), Value(3)})},
                 {"scale", Value(1.0)},
                 {"eps", Value(1e-5)},
                 {"ok", Value(true)},
                 {"none", Value()},
                 {"empty", Value(Array{})}}};
  EXPECT_EQ(
      dump(v),
      R"({"name":"w\"1\n","shape":[2,3],"scale":1.0,"eps":1e-05,"ok":true,"none":null,"empty":[]})");
  EXPECT_EQ(dump(Value(Object{{"a", Value(Array{Value(1)})}, {"b", Value(Object{})}}), 2),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(dump(Value(std::string("\x01\x1f\x7f"))), "\"\\u0001\\u001f\x7f\"");
}

TEST(Json, DumpParseRoundTrip) {
  const char* doc =
      R"({"a":[0.1,1e+300,5e-324,-0.0,123456789.125,-9223372036854775808,9223372036854775807],)"
      R"("s":"\u00e9\ud83d\ude00\t","n":null,"o":{"x":{"y":[true,false]}}})";
  Value v = parse(doc);
  EXPECT_EQ(parse(dump(v)), v);
  EXPECT_EQ(parse(dump(v, 4)), v);
  // Every real reads back to the same bits, and stays a real.
  for (double d : {0.1, 1.0 / 3.0, 1e300, 5e-324, 2.0, -0.0, 1e21, 123456789.0}) {
    Value back = parse(dump(Value(d)));
    EXPECT_EQ(back.kind(), Kind::real) << dump(Value(d));
    EXPECT_EQ(std::bit_cast<uint64_t>(back.as_double()), std::bit_cast<uint64_t>(d)) << d;
  }
}

TEST(Json, DumpRejectsWhatJsonCannotHold) {
  EXPECT_THROW(dump(Value(std::nan(""))), Error);
  EXPECT_THROW(dump(Value(INFINITY)), Error);
  EXPECT_THROW(dump(Value(std::string("\xC3"))), Error);  // cut-short UTF-8
}

TEST(Json, TypedAccessErrorsNameBothKinds) {
  Value v = parse(R"({"n": "3"})");
  try {
    v.at("n").as_int();
    FAIL() << "as_int accepted a string";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected an integer, got string"), std::string::npos);
  }
  try {
    v.at("missing");
    FAIL() << "at() accepted a missing key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no member \"missing\""), std::string::npos);
  }
  EXPECT_THROW(parse("[1]").as_object(), Error);
  EXPECT_THROW(parse("1").find("a"), Error);
}

TEST(Json, SetReplacesOrAppends) {
  Value v{Object{}};
  v.set("a", Value(1));
  v.set("b", Value(2));
  v.set("a", Value("x"));
  EXPECT_EQ(dump(v), R"({"a":"x","b":2})");
}

TEST(Json, StringsMixingPlainRunsEscapesAndUtf8) {
  // Plain ASCII is copied a run at a time; escapes, UTF-8 and the quote end a run.
  EXPECT_EQ(parse("\"plain \\n then \xC3\xA9 then \\u0041\\\"q\\\\\"").as_string(),
            "plain \n then \xC3\xA9 then A\"q\\");
  EXPECT_EQ(parse(R"({"": ""})").at("").as_string(), "");
  // A raw control character after a long run is reported where it is.
  EXPECT_EQ(parse_error("\"" + std::string(1000, 'a') + "\x01\""),
            "json: at line 1, column 1002 (byte 1001): expected an escape (\\n, \\t, \\u00XX, "
            "...) instead of a raw control character, found byte 0x01");
  EXPECT_EQ(parse_error("\"" + std::string(1000, 'a')),
            "json: at line 1, column 1002 (byte 1001): expected '\"' closing the string, found end "
            "of input");
}

TEST(Json, NestingDeeperThanTheLimitIsAnErrorNotAStackOverflow) {
  // 100000 levels would overflow the stack of a recursive parser without a
  // limit; each kind stops at level 129, where it is reported.
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_EQ(parse_error(objects),
            "json: at line 1, column 641 (byte 640): expected nesting no deeper than 128 levels, "
            "found '{'");
  EXPECT_EQ(parse_error(std::string(100000, '[') + std::string(100000, ']')),
            "json: at line 1, column 129 (byte 128): expected nesting no deeper than 128 levels, "
            "found '['");
}

TEST(Json, ValueCountLimit) {
  EXPECT_EQ(parse("[1, 2]", {.max_values = 3}), Value(Array{1, 2}));
  EXPECT_EQ(parse_error(R"({"a": [1, 2]})", {.max_values = 3}),
            "json: at line 1, column 11 (byte 10): expected no more than 3 values in the "
            "document, found '2'");
  // The default, 2^21: "0," takes two bytes of text and a 40-byte value.
  std::string zeros = "[0";
  for (size_t i = 1; i < (size_t(1) << 21) - 1; ++i) zeros += ",0";
  EXPECT_EQ(parse(zeros + "]").as_array().size(), (size_t(1) << 21) - 1);
  EXPECT_EQ(parse_error(zeros + ",0]"),
            "json: at line 1, column 4194304 (byte 4194303): expected no more than 2097152 "
            "values in the document, found '0'");
}

TEST(Json, ExponentsThatReadAsTheExtremesOfInt64) {
  // Found by fuzz_hf: the exponent's leading zeros make it read as exactly
  // INT64_MAX, to which the digits before the point were then added
  // (signed overflow). Too large is an Error, too small a zero.
  EXPECT_EQ(parse_error("333333e0009223372036854775807"),
            "json: at line 1, column 1 (byte 0): expected a number within the range of a "
            "double, found '3'");
  EXPECT_EQ(parse_error("0.5e-0009223372036854775808"), "");
  EXPECT_EQ(parse("0.5e-0009223372036854775808"), Value(0.0));
  EXPECT_EQ(parse("-0.5e-9223372036854775808").kind(), Kind::real);
  EXPECT_TRUE(std::signbit(parse("-0.5e-9223372036854775808").as_double()));
  EXPECT_EQ(parse_error("5e9223372036854775807"),
            "json: at line 1, column 1 (byte 0): expected a number within the range of a "
            "double, found '5'");
}

}  // namespace
}  // namespace reprise::json
