#include "io/bpe.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "base/error.h"
#include "io/unicode.h"

namespace reprise::io {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
}

// A pair that may be merged: the symbols at `pos` and its successor, as
// they were when the pair was queued; a merge since then makes it stale.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left, right, merged;
};

// Orders a max-heap so that its top is the lowest rank, leftmost first.
bool after(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

// Fibonacci hashing: the key's well-mixed high bits pick the slot.
size_t slot_of(uint64_t key, size_t capacity) {
  return size_t((key * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(capacity)));
}

}  // namespace

std::string byte_token(uint8_t byte) {
  const char* hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[byte >> 4] + hex[byte & 15] + ">";
}

int byte_of_token(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  const int hi = unicode::hex_digit(token[3]), lo = unicode::hex_digit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

int32_t space_word_start(const TokenIds& tokens) {
  for (const auto& [token, id] : tokens) {
    // A "▁" at `at` with another character before it.
    for (size_t at = token.find(kSpaceSymbol, 1); at != std::string::npos;
         at = token.find(kSpaceSymbol, at + 1)) {
      if (at < kSpaceSymbol.size() ||
          token.compare(at - kSpaceSymbol.size(), kSpaceSymbol.size(), kSpaceSymbol) != 0) {
        return -1;
      }
    }
  }
  auto it = tokens.find(kSpaceSymbol);
  return it == tokens.end() ? -1 : it->second;
}

void BpeMerges::add(int32_t left, int32_t right, Rule rule) {
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Slot> old =
        std::exchange(slots_, std::vector<Slot>(std::max<size_t>(16, 2 * slots_.size())));
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) add(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.rule);
    }
  }
  const uint64_t key = pair_key(left, right);
  for (size_t i = slot_of(key, slots_.size());; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == kEmpty) ++size_;
    if (slots_[i].key == kEmpty || slots_[i].key == key) {
      slots_[i] = {key, rule};
      return;
    }
  }
}

const BpeMerges::Rule* BpeMerges::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (size_t i = slot_of(key, slots_.size());; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) return &slots_[i].rule;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

void BpeMerges::apply(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  REPRISE_CHECK(n < size_t(std::numeric_limits<int32_t>::max()), "BPE: a word of ", n,
                " symbols is too long");
  // Scratch space kept per thread: most words are a few symbols long, and
  // allocating for each one would cost more than merging it.
  struct Workspace {
    std::vector<int32_t> prev, next;  // the symbols as a linked list over their positions
    std::vector<Candidate> queue;     // a heap, top: the next merge
  };
  thread_local Workspace w;
  std::vector<int32_t>& prev = w.prev;
  std::vector<int32_t>& next = w.next;
  std::vector<Candidate>& queue = w.queue;
  prev.resize(n);
  next.resize(n);
  queue.clear();
  for (size_t i = 0; i < n; ++i) {
    prev[i] = int32_t(i) - 1;
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
  }
  auto candidate = [&](int32_t pos) {
    const int32_t right_pos = next[pos];
    if (right_pos < 0) return false;
    const Rule* r = find(symbols[pos], symbols[right_pos]);
    if (r != nullptr) queue.push_back({r->rank, pos, symbols[pos], symbols[right_pos], r->merged});
    return r != nullptr;
  };
  for (size_t i = 0; i + 1 < n; ++i) candidate(int32_t(i));
  std::make_heap(queue.begin(), queue.end(), after);

  // A symbol merged into its left neighbour becomes -1.
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), after);
    const Candidate c = queue.back();
    queue.pop_back();
    const int32_t right_pos = next[c.pos];
    if (symbols[c.pos] != c.left || right_pos < 0 || symbols[right_pos] != c.right) continue;
    symbols[c.pos] = c.merged;
    symbols[right_pos] = -1;
    next[c.pos] = next[right_pos];
    if (next[c.pos] >= 0) prev[next[c.pos]] = c.pos;
    if (prev[c.pos] >= 0 && candidate(prev[c.pos])) {
      std::push_heap(queue.begin(), queue.end(), after);
    }
    if (candidate(c.pos)) std::push_heap(queue.begin(), queue.end(), after);
  }
  std::erase(symbols, -1);
  // A very long word (a whole text, for a tokenizer without a
  // pre-tokenizer) would leave this thread holding large buffers.
  if (n > (size_t(1) << 16)) w = Workspace{};
}

void BpeWord::end(std::vector<int64_t>& ids) {
  merges_->apply(symbols_);
  ids.insert(ids.end(), symbols_.begin(), symbols_.end());
  symbols_.clear();
}

}  // namespace reprise::io
