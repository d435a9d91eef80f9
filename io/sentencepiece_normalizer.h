#pragma once
// SentencePiece's normalizer (its NormalizerSpec), which runs before the
// model: character rewriting by the precompiled character map (NFKC and
// friends, compiled into a trie; empty for Llama 2's "identity"), then the
// whitespace rules, in one left-to-right pass:
//
//   remove_extra_whitespaces: drop leading and trailing spaces, squeeze runs
//   add_dummy_prefix:         a space before the text ("world" and
//                             "hello world" then both hold " world")
//   escape_whitespaces:       every space becomes U+2581 "▁"
//
// User-defined symbols are copied unchanged, and a byte that is not UTF-8
// becomes U+FFFD, as in SentencePiece.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reprise::io {

class SentencePieceNormalizer {
 public:
  struct Spec {
    std::string_view precompiled_charsmap;  // empty: no rewriting
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = true;
    bool escape_whitespaces = true;
    bool treat_whitespace_as_suffix = false;  // the dummy space goes at the end
  };
  // `path` names the model file in errors.
  SentencePieceNormalizer(const Spec& spec, std::vector<std::string> user_defined,
                          const std::string& path);

  std::string normalize(std::string_view text) const;

  // The length of the longest user-defined symbol that starts `text`, or 0.
  size_t user_defined_prefix(std::string_view text) const;

 private:
  // The normalized form of the start of `input` and how many bytes it stands for.
  std::pair<std::string_view, size_t> normalize_prefix(std::string_view input) const;
  // The longest prefix of `input` the character map rewrites: its length (0
  // when none) and the offset of its replacement in replacements_.
  std::pair<size_t, uint32_t> charsmap_match(std::string_view input) const;

  Spec spec_;
  std::vector<uint32_t> trie_;             // a Darts-clone double array
  std::string replacements_;               // NUL-terminated strings the trie's values point at
  std::vector<std::string> user_defined_;  // longest first
};

}  // namespace reprise::io
