#pragma once
// The "model" of a Hugging Face tokenizer.json whose type is "BPE": a
// vocabulary, ranked merges, and what happens to a character that is not
// in the vocabulary (byte fallback to <0xAB> tokens, or the unknown token,
// or nothing). GPT-2 and Llama 3 files are byte-level (every byte is a
// token, so nothing is unknown); Llama 2 files use byte fallback.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/bpe.h"
#include "io/json.h"

namespace reprise::io::hf {

// Ids are below this, so a file cannot make the id tables arbitrarily
// large; the largest real vocabularies have about 2^18 tokens.
constexpr int64_t kMaxVocab = int64_t(1) << 22;

class BpeModel {
 public:
  // config: the "model" member of the file (at `path`, for errors).
  BpeModel(const json::Value& config, const std::string& path);
  BpeModel(BpeModel&&) = default;  // tokens_ points into ids_, so no copies
  BpeModel(const BpeModel&) = delete;

  // A word buffer for encode(): one per encode call, reused for every piece.
  BpeWord word() const { return BpeWord(merges_, space_word_start_); }
  // Appends the ids of one pre-tokenized piece.
  void encode(std::string_view piece, BpeWord& word, std::vector<int64_t>& ids) const;

  std::optional<int32_t> find(std::string_view token) const;
  // The token of `id`, or nullptr when the vocabulary has none.
  const std::string* token(int32_t id) const;
  // One past the largest id.
  int32_t size() const { return int32_t(tokens_.size()); }

 private:
  TokenIds ids_;
  std::vector<const std::string*> tokens_;  // by id, into ids_'s keys
  BpeMerges merges_;
  std::optional<int32_t> unk_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;           // a piece that is a token is that token, merges or not
  std::array<int32_t, 256> byte_ids_{};  // the id of "<0xAB>" for byte fallback, or -1
  // The ids of the one-character tokens of the first code points (the
  // byte-level alphabet, "▁", most alphabets), or -1: a load instead of a
  // string hash for most characters.
  static constexpr char32_t kCharTable = 0x3000;
  std::vector<int32_t> char_ids_;
  int32_t space_word_start_ = -1;  // io/bpe.h
};

}  // namespace reprise::io::hf
