// io/unicode: decoding never fails, and the generated category table and
// White_Space agree with Unicode at known code points.

#include "io/unicode.h"

#include <gtest/gtest.h>

#include <string>

namespace reprise::io::unicode {
namespace {

TEST(Unicode, DecodesWellFormedUtf8) {
  const std::string text = "A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // A é 中 😀
  EXPECT_EQ(decode_utf8(text, 0).cp, U'A');
  EXPECT_EQ(decode_utf8(text, 1).cp, U'\u00E9');
  EXPECT_EQ(decode_utf8(text, 3).cp, U'\u4E2D');
  EXPECT_EQ(decode_utf8(text, 6).cp, U'\U0001F600');
  EXPECT_EQ(decode_utf8(text, 6).length, 4u);
  std::string out;
  for (char32_t cp : {U'A', U'\u00E9', U'\u4E2D', U'\U0001F600'}) append_utf8(out, cp);
  EXPECT_EQ(out, text);
}

TEST(Unicode, EachIllFormedByteDecodesAlone) {
  // A lone continuation byte, an overlong '/', a surrogate, a code point
  // past U+10FFFF, a truncated sequence and a byte that never starts one.
  for (const std::string bad :
       {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8", "\xFF"}) {
    const Decoded d = decode_utf8(bad, 0);
    EXPECT_EQ(d.cp, kInvalidByte) << bad;
    EXPECT_EQ(d.length, 1u) << bad;
  }
}

TEST(Unicode, GeneralCategories) {
  EXPECT_EQ(category(U'A'), Category::Lu);
  EXPECT_EQ(category(U'z'), Category::Ll);
  EXPECT_EQ(category(U'\u01C5'), Category::Lt);      // Dž
  EXPECT_EQ(category(U'\u4E2D'), Category::Lo);      // 中
  EXPECT_EQ(category(U'\u0301'), Category::Mn);      // combining acute
  EXPECT_EQ(category(U'\u0663'), Category::Nd);      // Arabic-Indic three
  EXPECT_EQ(category(U'\u00BD'), Category::No);      // ½
  EXPECT_EQ(category(U'\u2160'), Category::Nl);      // Ⅰ
  EXPECT_EQ(category(U'\U0001F600'), Category::So);  // 😀, past the flat table
  EXPECT_EQ(category(U'\U000E0001'), Category::Cf);  // language tag
  // Letters newer than Python's unicodedata 14.0, as tokenizers' Oniguruma has them.
  EXPECT_EQ(category(U'\U00031350'), Category::Lo);  // CJK Extension H (Unicode 15.0)
  EXPECT_EQ(category(U'\U0002EBF0'), Category::Lo);  // CJK Extension I (Unicode 15.1)
  EXPECT_EQ(category(U'\U0010FFFF'), Category::Cn);
  EXPECT_EQ(category(kInvalidByte), Category::Cn);
}

TEST(Unicode, WhiteSpaceIsThePropListSet) {
  for (char32_t cp :
       {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680', U'\u2000',
        U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
    EXPECT_TRUE(is_white_space(cp)) << uint32_t(cp);
  }
  for (char32_t cp : {U'\x1C', U'a', U'\u180E', U'\u200B', U'\uFEFF', kInvalidByte}) {
    EXPECT_FALSE(is_white_space(cp)) << uint32_t(cp);
  }
}

}  // namespace
}  // namespace reprise::io::unicode
