// io/regex: Oniguruma's meaning for the syntax tokenizer patterns use, the
// syntax it refuses, and the bound on backtracking.

#include "io/regex.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/support/expect_error.h"

namespace reprise::io {
namespace {

using testing::expect_error;

std::vector<std::string> matches(const std::string& pattern, const std::string& text) {
  std::vector<std::string> out;
  Regex(pattern).for_each_match(text,
                                [&](size_t b, size_t e) { out.push_back(text.substr(b, e - b)); });
  return out;
}

TEST(Regex, OnigurumaSemantics) {
  using V = std::vector<std::string>;
  EXPECT_EQ(matches(R"(\s+(?!\S)|\s+)", "a   b"), (V{"  ", " "}));  // backtracks into the lookahead
  EXPECT_EQ(matches(R"(\p{N}{1,3})", "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(matches(R"((?i:'s|'ll))", "'S 'Ll 's"), (V{"'S", "'Ll", "'s"}));
  EXPECT_EQ(matches(R"(a+?)", "aaa"), (V{"a", "a", "a"}));
  EXPECT_EQ(matches(R"(ab|a)", "aab"), (V{"a", "ab"}));  // leftmost-first, not longest
  EXPECT_EQ(matches(R"([^\s\p{L}]+)", "a,.b 1€"), (V{",.", "1€"}));
  EXPECT_EQ(matches(R"(\x{1F600}|\u00e9)", "é😀"), (V{"é", "😀"}));
  EXPECT_EQ(matches(R"(x*)", "ab"), (V{"", "", ""}));  // empty matches, one per position
  // \s is White_Space: no-break and ideographic spaces are, U+200B is not.
  EXPECT_EQ(matches(R"(\s)", "\u00a0\u3000\u200b"), (V{"\u00a0", "\u3000"}));
  // An ill-formed byte is matched by negated classes and nothing else.
  EXPECT_EQ(matches(R"([^a]|a)",
                    "\xff"
                    "a"),
            (V{"\xff", "a"}));
  EXPECT_EQ(matches(R"(\p{L})", "\xff"), V{});
}

TEST(Regex, RefusesWhatItDoesNotSupport) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a++", "a second quantifier"},
      {"^a", "no anchor"},
      {"(?i)a", "':' after (?i"},
      {"(?i:[a-z])", "a character class inside (?i:...)"},
      {"(?i:é)", "a non-ASCII literal inside (?i:...)"},
      {"(a*)*", "a repeated expression that can match the empty string"},
      {R"(\p{Letter})", "a general category name"},
      {R"(\k<x>)", "a supported escape"},
      {"a{3,2}", "m < n"},
      {"a{1001}", "above 1000"},
      {"(a", "')'"},
      {"a)", "an unmatched ')'"},
      {"[a", "']' closing a character class"},
      {"[[a]]", "nested classes"},
      {std::string(70, '(') + std::string(70, ')'), "deeper than 64"},
  };
  for (const auto& [pattern, message] : cases) {
    expect_error([&] { Regex r(pattern); }, {"regex '" + pattern + "'", message});
  }
  expect_error([] { Regex r(std::string(5000, 'a')); }, {"5000 bytes, more than the 4096"});
}

TEST(Regex, GivesUpOnCatastrophicBacktracking) {
  // (a+)+b on a's without a b takes 2^n steps in a backtracking engine.
  const Regex re("(a+)+b");
  expect_error([&] { re.for_each_match(std::string(40, 'a'), [](size_t, size_t) {}); },
               {"too many backtracking steps"});
}

}  // namespace
}  // namespace reprise::io
