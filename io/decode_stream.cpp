#include "io/decode_stream.h"

#include "base/error.h"

namespace reprise::io {
namespace {

// The length of `s` without a trailing UTF-8 sequence that is cut short: a
// lead byte followed by fewer continuation bytes than it announces.
size_t complete_utf8_length(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = (c & 0xE0) == 0xC0   ? 2
                        : (c & 0xF0) == 0xE0 ? 3
                        : (c & 0xF8) == 0xF0 ? 4
                                             : 1;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace

DecodeStream::DecodeStream(const Tokenizer& tokenizer, std::vector<int64_t> prompt)
    : tokenizer_(tokenizer), ids_(std::move(prompt)), prompt_text_(tokenizer.decode(ids_)) {}

std::string DecodeStream::push(int64_t id) {
  REPRISE_CHECK(id >= 0 && id < tokenizer_.vocab_size(), "the model chose id ", id,
                ", which the tokenizer (", tokenizer_.describe(), ") has no text for");
  ids_.push_back(id);
  return next(true);
}

std::string DecodeStream::finish() { return next(false); }

std::string DecodeStream::next(bool hold_incomplete) {
  const std::string text = tokenizer_.decode(ids_);
  if (text.compare(0, prompt_text_.size(), prompt_text_) != 0) return "";
  const std::string_view after = std::string_view(text).substr(prompt_text_.size());
  if (after.compare(0, printed_.size(), printed_) != 0) return "";
  std::string_view fresh = after.substr(printed_.size());
  if (hold_incomplete) fresh = fresh.substr(0, complete_utf8_length(fresh));
  printed_.append(fresh);
  return std::string(fresh);
}

}  // namespace reprise::io
