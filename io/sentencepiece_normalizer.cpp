#include "io/sentencepiece_normalizer.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "io/bpe.h"
#include "io/unicode.h"

namespace reprise::io {

namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Fields of one unit of a Darts-clone double array.
bool has_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t value(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

SentencePieceNormalizer::SentencePieceNormalizer(const Spec& spec,
                                                 std::vector<std::string> user_defined,
                                                 const std::string& path)
    : spec_(spec), user_defined_(std::move(user_defined)) {
  // The map is <trie size: uint32 LE><trie: that many bytes><replacements>.
  const std::string_view blob = spec.precompiled_charsmap;
  spec_.precompiled_charsmap = {};  // the trie and strings are copied out below
  if (!blob.empty()) {
    uint32_t trie_bytes = 0;
    REPRISE_CHECK(blob.size() > 4, path, ": normalizer_spec.precompiled_charsmap is truncated");
    std::memcpy(&trie_bytes, blob.data(), 4);
    REPRISE_CHECK(trie_bytes % 4 == 0 && trie_bytes > 0 && trie_bytes <= blob.size() - 4, path,
                  ": normalizer_spec.precompiled_charsmap has a trie of ", trie_bytes,
                  " bytes, which does not fit its ", blob.size(), " bytes");
    trie_.resize(trie_bytes / 4);
    std::memcpy(trie_.data(), blob.data() + 4, trie_bytes);
    replacements_ = std::string(blob.substr(4 + trie_bytes));
  }
  std::stable_sort(user_defined_.begin(), user_defined_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

size_t SentencePieceNormalizer::user_defined_prefix(std::string_view text) const {
  for (const std::string& s : user_defined_) {
    if (text.starts_with(s)) return s.size();
  }
  return 0;
}

std::pair<size_t, uint32_t> SentencePieceNormalizer::charsmap_match(std::string_view input) const {
  // Darts-clone's commonPrefixSearch, keeping the longest match; every
  // index is checked, since the trie comes from the file.
  std::pair<size_t, uint32_t> longest{0, 0};
  if (trie_.empty()) return longest;
  size_t node = offset(trie_[0]);
  for (size_t i = 0; i < input.size(); ++i) {
    const uint8_t c = uint8_t(input[i]);
    node ^= c;
    if (node >= trie_.size()) break;
    const uint32_t unit = trie_[node];
    if (label(unit) != c) break;
    node ^= offset(unit);
    if (node >= trie_.size()) break;
    if (has_leaf(unit)) longest = {i + 1, value(trie_[node])};
  }
  return longest;
}

std::pair<std::string_view, size_t> SentencePieceNormalizer::normalize_prefix(
    std::string_view input) const {
  if (const size_t n = user_defined_prefix(input)) return {input.substr(0, n), n};
  if (const auto [length, at] = charsmap_match(input); length > 0) {
    REPRISE_CHECK(at < replacements_.size(), "SentencePiece normalizer: a character map entry at ",
                  at, " is past its ", replacements_.size(), " bytes of replacements");
    const size_t end = replacements_.find('\0', at);
    return {std::string_view(replacements_).substr(at, end == std::string::npos ? end : end - at),
            length};
  }
  const unicode::Decoded d = unicode::decode_utf8(input, 0);
  if (d.cp == unicode::kInvalidByte) return {kReplacementCharacter, 1};
  return {input.substr(0, d.length), d.length};
}

std::string SentencePieceNormalizer::normalize(std::string_view input) const {
  // One pass, as SentencePiece's Normalizer::Normalize makes it.
  if (spec_.remove_extra_whitespaces) {
    while (!input.empty()) {
      const auto [normalized, consumed] = normalize_prefix(input);
      if (normalized != " ") break;
      input.remove_prefix(consumed);
    }
  }
  if (input.empty()) return {};
  const std::string_view space = spec_.escape_whitespaces ? kSpaceSymbol : " ";
  std::string out(spec_.add_dummy_prefix && !spec_.treat_whitespace_as_suffix ? space : "");
  out.reserve(input.size() * 3 / 2 + 4);
  bool previous_space = spec_.remove_extra_whitespaces;
  while (!input.empty()) {
    auto [normalized, consumed] = normalize_prefix(input);
    while (previous_space && normalized.starts_with(' ')) normalized.remove_prefix(1);
    if (!normalized.empty()) {
      for (char c : normalized) {
        if (c == ' ') {
          out.append(space);
        } else {
          out += c;
        }
      }
      previous_space = normalized.ends_with(' ');
    }
    input.remove_prefix(consumed);
    if (!spec_.remove_extra_whitespaces) previous_space = false;
  }
  if (spec_.remove_extra_whitespaces) {
    while (out.ends_with(space)) out.erase(out.size() - space.size());
  }
  if (spec_.add_dummy_prefix && spec_.treat_whitespace_as_suffix) out.append(space);
  return out;
}

}  // namespace reprise::io
