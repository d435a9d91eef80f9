#pragma once
// The little of Unicode the tokenizers need: UTF-8 decoding that never
// fails, the general category of a code point (what \p{L}, \p{N} mean in a
// pre-tokenizer regex) and the White_Space property (what \s means).
//
// Text from files is not always valid UTF-8, and a tokenizer must still
// encode it losslessly, so decoding never raises: each byte that does not
// start a well-formed sequence (overlong forms, surrogates, code points past
// U+10FFFF and truncated sequences included) decodes on its own to
// kInvalidByte, which has category Cn and is no whitespace.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace reprise::io::unicode {

// The 30 general categories, in the order of the Unicode standard's table.
// clang-format off
enum class Category : uint8_t {
  Lu, Ll, Lt, Lm, Lo,          // letters
  Mn, Mc, Me,                  // marks
  Nd, Nl, No,                  // numbers
  Pc, Pd, Ps, Pe, Pi, Pf, Po,  // punctuation
  Sm, Sc, Sk, So,              // symbols
  Zs, Zl, Zp,                  // separators
  Cc, Cf, Cs, Co, Cn,          // other (Cn: unassigned)
};
// clang-format on
constexpr int kCategoryCount = 30;

// What an ill-formed byte decodes to; above U+10FFFF, so no text has it.
constexpr char32_t kInvalidByte = 0x110000;

struct Decoded {
  char32_t cp;      // the code point, or kInvalidByte
  uint32_t length;  // bytes consumed, 1..4
};

// Decodes the character that starts at text[pos]; pos < text.size().
Decoded decode_utf8(std::string_view text, size_t pos);

// Appends cp (a code point, not a surrogate) as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// The general category of cp; Cn for kInvalidByte.
Category category(char32_t cp);

// Unicode's White_Space property (PropList.txt): what \s matches.
bool is_white_space(char32_t cp);

// The value of a hexadecimal digit (either case), or -1.
inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace reprise::io::unicode
