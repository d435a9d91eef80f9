#pragma once
// Byte-pair merging, the step that Hugging Face's BPE model and
// SentencePiece's BPE model share: a word starts as one symbol per
// character (or byte), and the adjacent pair whose rule has the lowest rank
// is merged, the leftmost such pair first on a tie, until no pair has a
// rule. Hugging Face ranks a rule by its line in "merges"; SentencePiece by
// the score of the piece it makes (io/sentencepiece.cpp builds the rules).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace reprise::io {

// Token string -> id, looked up by string_view without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Byte fallback writes a byte that has no token of its own as the token
// "<0xAB>" (upper-case hex, as both libraries write it).
std::string byte_token(uint8_t byte);
// "<0xAB>" (hex digits of either case) -> 0xAB, or -1 for any other string.
int byte_of_token(std::string_view token);

// U+2581 "▁", which SentencePiece (and so Llama 2) writes for a space.
inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";

// The id of the token "▁" when no token has "▁" after another character,
// else -1. Merging then never joins across a "▁" that follows another
// character, so a long text that reaches the model as one word (no
// pre-tokenizer splits it) can be cut there and each part merged alone:
// the same ids, but short merge queues instead of one as long as the text.
int32_t space_word_start(const TokenIds& tokens);

class BpeMerges {
 public:
  struct Rule {
    int32_t rank;    // lower merges first
    int32_t merged;  // the id of the token the pair becomes
  };

  // Adds the rule left + right -> merged (ids >= 0); a later rule for the
  // same pair replaces the earlier one, as in Hugging Face's merge map.
  void add(int32_t left, int32_t right, Rule rule);
  size_t size() const { return size_; }

  // Merges `symbols` (token ids, one per initial symbol) in place until no
  // adjacent pair has a rule. O(n log n) in the number of symbols.
  void apply(std::vector<int32_t>& symbols) const;

 private:
  const Rule* find(int32_t left, int32_t right) const;

  // An open-addressing table (linear probing, at most half full): merging
  // looks a rule up for every pair it considers, and a flat table keeps
  // each lookup to about one cache line.
  struct Slot {
    uint64_t key = kEmpty;  // left << 32 | right
    Rule rule{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// The initial symbols of the word being read, merged into ids when it
// ends, and cut before a word start (space_word_start()). Make one per
// encode() call and reuse it for every word, so that its buffer is
// allocated once.
class BpeWord {
 public:
  // word_start: space_word_start()'s id, or -1 for no cuts.
  BpeWord(const BpeMerges& merges, int32_t word_start)
      : merges_(&merges), word_start_(word_start) {}

  // Appends a symbol; before a word start, first ends the word so far.
  void push(int32_t symbol, std::vector<int64_t>& ids) {
    if (symbol == word_start_ && !symbols_.empty() && symbols_.back() != symbol) end(ids);
    symbols_.push_back(symbol);
  }
  // Merges the symbols pushed since the last end() and appends them to ids.
  void end(std::vector<int64_t>& ids);

 private:
  const BpeMerges* merges_;
  int32_t word_start_;
  std::vector<int32_t> symbols_;
};

}  // namespace reprise::io
