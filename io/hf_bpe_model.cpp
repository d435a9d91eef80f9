#include "io/hf_bpe_model.h"

#include <algorithm>

#include "base/error.h"
#include "io/hf_pipeline.h"
#include "io/unicode.h"

namespace reprise::io::hf {

namespace {

// The two tokens of one "merges" entry: "a b" (older files) or ["a", "b"].
std::pair<std::string_view, std::string_view> merge_pair(const json::Value& m,
                                                         const std::string& at) {
  if (m.is_string()) {
    const std::string& line = m.as_string();
    const size_t space = line.find(' ');
    REPRISE_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos, at,
                  ": \"", line, "\" must be two tokens separated by one space");
    return {std::string_view(line).substr(0, space), std::string_view(line).substr(space + 1)};
  }
  REPRISE_CHECK(m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() &&
                    m.as_array()[1].is_string(),
                at, " must be \"a b\" or [\"a\", \"b\"]");
  return {m.as_array()[0].as_string(), m.as_array()[1].as_string()};
}

}  // namespace

BpeModel::BpeModel(const json::Value& config, const std::string& path) {
  if (const json::Value* type = member(config, "type", path)) {
    REPRISE_CHECK(type->is_string() && type->as_string() == "BPE", path,
                  ".type: only \"BPE\" models are supported, got ",
                  type->is_string() ? "\"" + type->as_string() + "\"" : json::dump(*type));
  }
  const json::Value* dropout = member(config, "dropout", path);
  REPRISE_CHECK(dropout == nullptr || (dropout->is_number() && dropout->as_double() == 0.0), path,
                ".dropout: BPE dropout makes encoding random and is not supported");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json::Value* a = member(config, affix, path);
    REPRISE_CHECK(a == nullptr || (a->is_string() && a->as_string().empty()), path, ".", affix,
                  " is not supported (GPT-2, Llama 2 and Llama 3 models have none)");
  }
  fuse_unk_ = bool_member(config, "fuse_unk", false, path);
  byte_fallback_ = bool_member(config, "byte_fallback", false, path);
  ignore_merges_ = bool_member(config, "ignore_merges", false, path);

  const json::Value& vocab = required(config, "vocab", path);
  REPRISE_CHECK(vocab.is_object(), path, ".vocab must be an object {token: id}");
  const json::Object& entries = vocab.as_object();
  REPRISE_CHECK(int64_t(entries.size()) <= kMaxVocab, path, ".vocab has ", entries.size(),
                " tokens, more than the ", kMaxVocab, " accepted");
  ids_.reserve(entries.size());
  for (const auto& [token, id] : entries) {
    REPRISE_CHECK(id.is_int() && id.as_int() >= 0 && id.as_int() < kMaxVocab, path, ".vocab[\"",
                  token, "\"] must be an id in [0, ", kMaxVocab, ")");
    const int32_t i = int32_t(id.as_int());
    if (i >= int32_t(tokens_.size())) tokens_.resize(size_t(i) + 1, nullptr);
    REPRISE_CHECK(tokens_[i] == nullptr, path, ".vocab gives id ", i, " to both \"", *tokens_[i],
                  "\" and \"", token, "\"");
    tokens_[i] = &ids_.emplace(token, i).first->first;
  }

  if (const json::Value* unk = member(config, "unk_token", path)) {
    REPRISE_CHECK(unk->is_string(), path, ".unk_token must be a string or null");
    unk_ = find(unk->as_string());
    REPRISE_CHECK(unk_.has_value(), path, ".unk_token \"", unk->as_string(),
                  "\" is not in the vocabulary");
  }
  for (int b = 0; b < 256; ++b) byte_ids_[b] = find(byte_token(uint8_t(b))).value_or(-1);
  space_word_start_ = space_word_start(ids_);
  char_ids_.assign(kCharTable, -1);
  for (const auto& [token, id] : ids_) {
    const unicode::Decoded d = unicode::decode_utf8(token, 0);
    if (d.length == token.size() && d.cp < kCharTable) char_ids_[d.cp] = id;
  }

  const json::Value& merges = required(config, "merges", path);
  REPRISE_CHECK(merges.is_array(), path, ".merges must be an array");
  int32_t rank = 0;
  std::string joined;
  for (size_t i = 0; i < merges.as_array().size(); ++i) {
    const json::Value& m = merges.as_array()[i];
    const std::string at = path + ".merges[" + std::to_string(i) + "]";
    if (m.is_string() && m.as_string().starts_with("#version")) continue;  // merges.txt header
    const auto [left, right] = merge_pair(m, at);
    joined.assign(left).append(right);
    const std::optional<int32_t> l = find(left), r = find(right), merged = find(joined);
    REPRISE_CHECK(l && r && merged, at, ": \"",
                  !l   ? left
                  : !r ? right
                       : std::string_view(joined),
                  "\" is not in the vocabulary");
    merges_.add(*l, *r, {rank++, *merged});
  }
}

std::optional<int32_t> BpeModel::find(std::string_view token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token(int32_t id) const {
  return id >= 0 && id < size() ? tokens_[id] : nullptr;
}

void BpeModel::encode(std::string_view piece, BpeWord& word, std::vector<int64_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (std::optional<int32_t> whole = find(piece)) {
      ids.push_back(*whole);
      return;
    }
  }
  bool pending_unk = false;  // an unknown run, held back so that fuse_unk can join the next
  for (size_t pos = 0; pos < piece.size();) {
    const unicode::Decoded d = unicode::decode_utf8(piece, pos);
    const std::string_view c = piece.substr(pos, d.length);
    pos += d.length;
    std::optional<int32_t> id;
    if (d.cp >= kCharTable) {
      id = find(c);
    } else if (char_ids_[d.cp] >= 0) {
      id = char_ids_[d.cp];
    }
    const bool bytes = !id && byte_fallback_ && std::all_of(c.begin(), c.end(), [&](char b) {
      return byte_ids_[uint8_t(b)] >= 0;
    });
    if (id || bytes) {
      if (pending_unk) word.push(*unk_, ids);
      pending_unk = false;
      if (id) {
        word.push(*id, ids);
      } else {
        for (char b : c) word.push(byte_ids_[uint8_t(b)], ids);
      }
    } else if (unk_) {
      // Without fuse_unk each unknown character is an unknown token.
      if (pending_unk && !fuse_unk_) word.push(*unk_, ids);
      pending_unk = true;
    }
    // A character with no token, no byte tokens and no unknown token is
    // dropped, as the library does.
  }
  if (pending_unk) word.push(*unk_, ids);
  word.end(ids);
}

}  // namespace reprise::io::hf
