#include "io/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

namespace reprise::io::unicode {

namespace {

struct CategoryRun {
  char32_t first;
  Category category;
};

using enum Category;
constexpr CategoryRun kRuns[] = {
#include "io/unicode_categories.inc"
};

Category category_by_search(char32_t cp) {
  auto after = std::upper_bound(std::begin(kRuns), std::end(kRuns), cp,
                                [](char32_t c, const CategoryRun& r) { return c < r.first; });
  return std::prev(after)->category;
}

// Almost all text is in the Basic Multilingual Plane, so its categories are
// also kept flat (64 KiB), built on first use: one load instead of a
// 12-step binary search per character.
const std::array<Category, 0x10000>& bmp_categories() {
  static const std::array<Category, 0x10000> table = [] {
    std::array<Category, 0x10000> t{};
    for (size_t i = 0; i < std::size(kRuns) && kRuns[i].first < 0x10000; ++i) {
      const char32_t end = i + 1 < std::size(kRuns) ? kRuns[i + 1].first : 0x110000;
      std::fill(t.begin() + kRuns[i].first, t.begin() + std::min<char32_t>(end, 0x10000),
                kRuns[i].category);
    }
    return t;
  }();
  return table;
}

}  // namespace

Decoded decode_utf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return uint8_t(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  // Sequence length and the smallest code point it may encode (shorter
  // forms are overlong, hence ill-formed).
  uint32_t length = 0;
  char32_t cp = 0, min_cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return {kInvalidByte, 1};
  }
  if (text.size() - pos < length) return {kInvalidByte, 1};
  for (uint32_t i = 1; i < length; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return {kInvalidByte, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalidByte, 1};
  return {cp, length};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

Category category(char32_t cp) {
  if (cp < 0x10000) return bmp_categories()[cp];
  if (cp > 0x10FFFF) return Cn;
  return category_by_search(cp);
}

bool is_white_space(char32_t cp) {
  // PropList.txt's White_Space ranges; unchanged since Unicode 6.3.
  constexpr std::pair<char32_t, char32_t> kRanges[] = {
      {0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
      {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
  return std::any_of(std::begin(kRanges), std::end(kRanges),
                     [cp](const auto& r) { return cp >= r.first && cp <= r.second; });
}

}  // namespace reprise::io::unicode
