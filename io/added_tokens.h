#pragma once
// The added tokens of a Hugging Face tokenizer.json ("added_tokens": the
// special tokens such as <|begin_of_text|>, and any the user added): they
// are found in the text before anything else runs, and each match becomes
// its own id whatever the model would have made of its characters.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace reprise::io {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false;  // only where no word character touches it
  bool lstrip = false;       // the match takes the whitespace before it
  bool rstrip = false;       // ... and after it
  bool normalized = true;    // matched in the normalized text, not the raw text
  bool special = false;
};

// Finds one group of added tokens (those matched before normalization, or
// those matched after) as Hugging Face does: the leftmost match, the
// longest at that position, then the next one after it; a match that fails
// single_word is dropped, not retried shorter.
class AddedTokenSplitter {
 public:
  struct Pattern {
    std::string text;  // what to find: the content, or its normalized form
    AddedToken token;
  };
  AddedTokenSplitter() = default;  // finds nothing
  explicit AddedTokenSplitter(std::vector<Pattern> patterns);

  bool empty() const { return patterns_.empty(); }

  struct Span {
    size_t begin, end;  // bytes of the text
    int32_t id;         // the added token's id, or -1 for plain text
  };
  // Consecutive non-empty spans that cover `text`.
  std::vector<Span> split(std::string_view text) const;

 private:
  // The longest match at text[pos], or nullptr.
  const Pattern* match_at(std::string_view text, size_t pos) const;

  std::vector<Pattern> patterns_;             // longest first
  std::vector<uint32_t> by_first_byte_[256];  // indices into patterns_
};

}  // namespace reprise::io
