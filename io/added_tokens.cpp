#include "io/added_tokens.h"

#include <algorithm>

#include "io/unicode.h"

namespace reprise::io {

namespace {

using unicode::Category;

// What Hugging Face's \w means for single_word (Rust's Unicode word
// characters): letters, marks, decimal digits, letter numbers, connectors.
bool is_word_character(char32_t cp) {
  switch (unicode::category(cp)) {
    case Category::Lu:
    case Category::Ll:
    case Category::Lt:
    case Category::Lm:
    case Category::Lo:
    case Category::Mn:
    case Category::Mc:
    case Category::Me:
    case Category::Nd:
    case Category::Nl:
    case Category::Pc:
      return true;
    default:
      return cp == 0x200C || cp == 0x200D;  // the joiners
  }
}

// The character that ends at text[end] (exclusive); an ill-formed byte is
// a character of its own, as when decoding forwards.
unicode::Decoded last_character(std::string_view text, size_t end) {
  size_t begin = end - 1;
  while (begin > 0 && end - begin < 4 && (uint8_t(text[begin]) & 0xC0) == 0x80) --begin;
  const unicode::Decoded d = unicode::decode_utf8(text, begin);
  if (begin + d.length == end) return d;
  return {unicode::kInvalidByte, 1};
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<Pattern> patterns)
    : patterns_(std::move(patterns)) {
  std::stable_sort(patterns_.begin(), patterns_.end(), [](const Pattern& a, const Pattern& b) {
    return a.text.size() > b.text.size();
  });
  for (uint32_t i = 0; i < patterns_.size(); ++i) {
    by_first_byte_[uint8_t(patterns_[i].text[0])].push_back(i);
  }
}

const AddedTokenSplitter::Pattern* AddedTokenSplitter::match_at(std::string_view text,
                                                                size_t pos) const {
  for (uint32_t i : by_first_byte_[uint8_t(text[pos])]) {
    if (text.substr(pos).starts_with(patterns_[i].text)) return &patterns_[i];
  }
  return nullptr;
}

std::vector<AddedTokenSplitter::Span> AddedTokenSplitter::split(std::string_view text) const {
  std::vector<Span> spans;
  size_t done = 0;  // end of the last span
  auto emit = [&](size_t begin, size_t end, int32_t id) {
    if (end > begin) spans.push_back({begin, end, id});
  };
  size_t pos = 0;
  while (pos < text.size()) {
    const Pattern* p = empty() ? nullptr : match_at(text, pos);
    if (p == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + p->text.size();
    pos = end;
    if (p->token.single_word) {
      const bool word_before = begin > 0 && is_word_character(last_character(text, begin).cp);
      const bool word_after =
          end < text.size() && is_word_character(unicode::decode_utf8(text, end).cp);
      if (word_before || word_after) continue;
    }
    if (p->token.lstrip) {
      while (begin > done) {
        const unicode::Decoded d = last_character(text, begin);
        if (!unicode::is_white_space(d.cp)) break;
        begin -= d.length;
      }
    }
    if (p->token.rstrip) {
      while (end < text.size()) {
        const unicode::Decoded d = unicode::decode_utf8(text, end);
        if (!unicode::is_white_space(d.cp)) break;
        end += d.length;
      }
      pos = end;
    }
    emit(done, begin, -1);
    emit(begin, end, p->token.id);
    done = end;
  }
  emit(done, text.size(), -1);
  return spans;
}

}  // namespace reprise::io
