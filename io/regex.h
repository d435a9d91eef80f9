#pragma once
// Regular expressions over Unicode code points, for the patterns that
// Hugging Face tokenizer.json files give their Split pre-tokenizers and
// Replace normalizers, such as Llama 3's (one pattern, broken after a "|"):
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Hugging Face runs them with Oniguruma; this engine has Oniguruma's
// meaning for the syntax it accepts: leftmost-first alternation, greedy
// (or lazy, with a trailing ?) quantifiers that backtrack, atomic
// lookahead, \s as Unicode White_Space, \p{..} as general categories.
//
// Accepted: literals (UTF-8), . (anything but \n), groups (...) and (?:...)
// (nothing is captured), (?i:...) over ASCII literals, lookahead (?=...)
// and (?!...), classes [...] and [^...] with ranges, quantifiers ? * + {n}
// {n,} {n,m}, escapes \s \S \d \D \w \W \p{X} \P{X} (X a general category
// or its one-letter group: L, Lu, N, Nd, ...), \t \n \r \f \v \xHH \x{H..}
// \uHHHH and escaped punctuation. Anything else (anchors, backreferences,
// possessive quantifiers, inline flags without a group, ...) is refused
// with an Error naming the pattern and the position, rather than read with
// another meaning.
//
// Text that is not valid UTF-8 is matched byte by byte for its ill-formed
// bytes (io/unicode.h), which match only negated classes and '.'.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reprise::io {

class Regex {
 public:
  // Compiles `pattern`; raises Error on syntax it does not accept.
  explicit Regex(std::string_view pattern);

  const std::string& pattern() const { return pattern_; }

  // Calls found(begin, end) with the byte span of each successive
  // leftmost-first match in `text`, searched as Oniguruma's find_iter does:
  // each search starts where the last match ended, and an empty match right
  // after the last match is skipped by one character. A search that
  // backtracks more than a fixed budget raises an Error, so a hostile
  // pattern cannot hang the caller.
  void for_each_match(std::string_view text,
                      const std::function<void(size_t, size_t)>& found) const;

 private:
  // A set of code points: the union of its items, complemented when
  // negated. ASCII membership is precomputed into a bitmap.
  struct CharClass {
    bool negated = false;
    std::vector<std::pair<char32_t, char32_t>> ranges;  // inclusive
    uint32_t categories = 0;                            // bit c: \p{c}
    std::vector<uint32_t> not_categories;               // each: \P{..}
    bool space = false, not_space = false;              // \s, \S
    uint64_t ascii[2] = {0, 0};

    bool contains(char32_t cp) const;  // before negation
    bool matches(char32_t cp) const;
  };

  // One instruction of a backtracking machine (Pike's and Thompson's
  // program form, run depth-first as Oniguruma does).
  enum class Op : uint8_t { literal, ascii_fold, char_class, any, split, jump, look, match };
  struct Inst {
    Op op;
    bool negate = false;  // look: (?!...) rather than (?=...)
    char32_t cp = 0;      // literal / ascii_fold (lower case); char_class: index
    int32_t x = 0;        // split: preferred branch; jump, look: continuation
    int32_t y = 0;        // split: the other branch
    // split: the ASCII characters branch x can start with. At an ASCII
    // character outside them the split goes straight to y, which keeps
    // most alternatives of a tokenizer pattern from being tried at all.
    uint64_t x_first[2] = {~uint64_t(0), ~uint64_t(0)};
  };

  struct Parser;
  struct Compiler;

  // Fills each split's x_first.
  void set_first_characters();
  using Stack = std::vector<std::pair<int32_t, size_t>>;  // (pc, byte offset) to resume

  bool match_at(std::string_view text, int32_t pc, size_t pos, size_t& end, Stack& stack,
                int64_t& budget) const;

  std::string pattern_;
  std::vector<Inst> code_;
  std::vector<CharClass> classes_;
};

}  // namespace reprise::io
