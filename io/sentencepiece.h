#pragma once
// SentencePiece BPE models (a tokenizer.model file, such as Llama 2's),
// read straight from the serialized ModelProto (io/protobuf.h) and encoded
// as SentencePieceProcessor::Encode does:
//
//   1. normalize (io/sentencepiece_normalizer.h): "Hello world" ->
//      "▁Hello▁world" for Llama 2;
//   2. split into characters, user-defined symbols whole;
//   3. merge pairs by the score of the piece they make, highest first
//      (io/bpe.h), never across a user-defined symbol;
//   4. a piece that is not in the vocabulary becomes its UTF-8 bytes as
//      <0xAB> pieces (byte_fallback), or the unknown id, one per run.
//
// Why our own reader and not libsentencepiece: with the normalizer and the
// wire-format reader it is about 700 lines and no dependency, where
// Debian's libsentencepiece-dev (0.1.97) would bring a system library and
// its protobuf runtime to every build for one file format; the format is
// stable, and the golden tests check the reader against the sentencepiece
// Python package. Unigram, word and char models are refused.

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/bpe.h"
#include "io/sentencepiece_normalizer.h"
#include "io/tokenizer.h"

namespace reprise::io {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `model`: the bytes of a serialized ModelProto; `path` names it in errors.
  SentencePieceTokenizer(std::string_view model, const std::string& path);

  static std::unique_ptr<SentencePieceTokenizer> load(const std::string& path);

  // add_special puts the BOS piece first (LlamaTokenizer's add_bos_token).
  std::vector<int64_t> encode(std::string_view text, bool add_special) const override;
  // As SentencePiece decodes: control pieces vanish, the unknown piece
  // reads " ⁇ ", and the dummy-prefix space of the first piece goes.
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t vocab_size() const override { return int64_t(pieces_.size()); }
  std::optional<int64_t> bos_id() const override { return bos_; }
  std::optional<int64_t> eos_id() const override { return eos_; }
  std::optional<int64_t> token_id(std::string_view token) const override;
  std::string describe() const override;

  // ModelProto.SentencePiece.Type
  enum class PieceType : uint8_t {
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6
  };
  struct Piece {
    std::string text;
    float score = 0;
    PieceType type = PieceType::normal;
  };

 private:
  // Steps 2-4 for normalized text without user-defined symbols.
  void encode_run(std::string_view normalized, BpeWord& word, std::vector<int64_t>& ids) const;
  // Step 4 for one piece that is not in the vocabulary.
  void encode_unknown(std::string_view piece, std::vector<int64_t>& ids) const;
  // The constructor's steps once the pieces are read.
  std::vector<std::string> index_pieces();
  void rank_merges();

  std::string path_;
  std::vector<Piece> pieces_;  // by id
  TokenIds normal_ids_;        // pieces that text maps to: normal and user-defined
  TokenIds reserved_ids_;      // control, unknown and byte pieces
  BpeMerges merges_;
  std::optional<SentencePieceNormalizer> normalizer_;
  int32_t unk_id_ = -1;
  int32_t space_word_start_ = -1;  // io/bpe.h
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};  // the id of <0xAB>, when byte_fallback
  std::string unk_surface_;              // what the unknown piece decodes to
  // Decoding drops the "▁" that starts the first piece when the normalizer
  // adds one (add_dummy_prefix) or drops leading spaces.
  bool add_dummy_prefix_ = true;
  bool remove_extra_whitespaces_ = true;
  std::optional<int64_t> bos_, eos_;
};

}  // namespace reprise::io
