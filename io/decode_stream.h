#pragma once
// Text for ids as they come, for printing while a model generates. One
// token's text is not always a piece of the whole's: a character may span
// several byte-level or byte-fallback tokens, and SentencePiece drops the
// space in front of the first piece only. So the stream decodes the whole
// sequence (prompt included) at every token and hands out what the text
// after the prompt's grew by, holding back a trailing UTF-8 sequence that
// is not complete yet, and waiting whenever the decoded text does not
// extend what was handed out.

#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace reprise::io {

class DecodeStream {
 public:
  // `tokenizer` must outlive the stream.
  DecodeStream(const Tokenizer& tokenizer, std::vector<int64_t> prompt);

  // Adds a generated id; returns the text to print now (often empty).
  // Raises when the tokenizer has no text for the id.
  std::string push(int64_t id);
  // What is left to print once generation is over (an incomplete tail
  // included).
  std::string finish();

  // The text after the prompt's, handed out so far.
  const std::string& printed() const { return printed_; }

 private:
  std::string next(bool hold_incomplete);

  const Tokenizer& tokenizer_;
  std::vector<int64_t> ids_;
  std::string prompt_text_;
  std::string printed_;
};

}  // namespace reprise::io
