#pragma once
// A Hugging Face tokenizer.json with a BPE model, encoded and decoded as
// the tokenizers library does (io/hf_pipeline.h lists the supported
// normalizers, pre-tokenizers, decoders and post-processors):
//
//   1. added tokens with "normalized": false are split out of the raw text;
//   2. each remaining stretch is normalized, and added tokens with
//      "normalized": true are split out of the result;
//   3. each remaining stretch is pre-tokenized into pieces, and the BPE
//      model turns each piece into ids;
//   4. with add_special, the post-processor's special tokens go around.
//
// The BOS and EOS tokens are those a tokenizer_config.json beside the file
// names (bos_token, eos_token); without one, BOS is the first special
// token of the post-processor's template and EOS is unknown.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/added_tokens.h"
#include "io/hf_bpe_model.h"
#include "io/hf_pipeline.h"
#include "io/json.h"
#include "io/tokenizer.h"

namespace reprise::io {

class HfTokenizer final : public Tokenizer {
 public:
  // `json`: the parsed tokenizer.json; `config`: the parsed
  // tokenizer_config.json, or nullptr; `path` names the file in errors.
  HfTokenizer(const json::Value& json, const json::Value* config, const std::string& path);

  // Reads `path` (a tokenizer.json) and the tokenizer_config.json beside
  // it, if there is one.
  static std::unique_ptr<HfTokenizer> load(const std::string& path);

  std::vector<int64_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> bos_id() const override { return bos_; }
  std::optional<int64_t> eos_id() const override { return eos_; }
  std::optional<int64_t> token_id(std::string_view token) const override;
  std::string describe() const override;

 private:
  // Steps 2 and 3 for one stretch of raw text between added tokens.
  void encode_text(std::string_view text, bool at_start, BpeWord& word,
                   std::vector<int64_t>& ids) const;

  std::string path_;
  hf::BpeModel model_;
  hf::Normalizer normalizer_;
  hf::PreTokenizer pre_tokenizer_;
  hf::Decoder decoder_;
  hf::Template template_;
  std::vector<AddedToken> added_;
  AddedTokenSplitter raw_added_, normalized_added_;
  std::vector<std::optional<std::string>> added_by_id_;  // the string an added id decodes from
  int64_t vocab_size_ = 0;
  std::optional<int64_t> bos_, eos_;
};

}  // namespace reprise::io
