#include "io/sentencepiece.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "io/protobuf.h"
#include "io/read_file.h"
#include "io/unicode.h"

namespace reprise::io {

namespace {

// Llama 2's tokenizer.model is 500 KB; the largest in common use are a few MB.
constexpr uint64_t kMaxModelBytes = 64 << 20;
constexpr size_t kMaxPieces = size_t(1) << 22;

// The TrainerSpec and NormalizerSpec fields that encoding depends on, with
// the proto's defaults.
struct TrainerSpec {
  int32_t model_type = 1;  // UNIGRAM
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::string unk_piece = "<unk>", bos_piece = "<s>", eos_piece = "</s>";
  std::string unk_surface = " \xE2\x81\x87 ";  // " ⁇ "
};

struct NormalizerSpec {
  std::string name;
  std::string_view precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

SentencePieceTokenizer::Piece read_piece(std::string_view bytes, const std::string& at) {
  SentencePieceTokenizer::Piece piece;
  ProtoReader r(bytes, at);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        piece.text = std::string(r.bytes());
        break;
      case 2:
        piece.score = r.fixed32_float();
        break;
      case 3: {
        const int32_t type = r.int32();
        REPRISE_CHECK(type >= 1 && type <= 6, at, ": type ", type, " is not a piece type (1..6)");
        piece.type = SentencePieceTokenizer::PieceType(type);
        break;
      }
      default:
        break;
    }
  }
  return piece;
}

TrainerSpec read_trainer_spec(std::string_view bytes, const std::string& at) {
  TrainerSpec spec;
  ProtoReader r(bytes, at);
  while (r.next()) {
    switch (r.field()) {
      case 3:
        spec.model_type = r.int32();
        break;
      case 24:
        spec.treat_whitespace_as_suffix = r.boolean();
        break;
      case 35:
        spec.byte_fallback = r.boolean();
        break;
      case 44:
        spec.unk_surface = std::string(r.bytes());
        break;
      case 45:
        spec.unk_piece = std::string(r.bytes());
        break;
      case 46:
        spec.bos_piece = std::string(r.bytes());
        break;
      case 47:
        spec.eos_piece = std::string(r.bytes());
        break;
      default:
        break;
    }
  }
  return spec;
}

NormalizerSpec read_normalizer_spec(std::string_view bytes, const std::string& at) {
  NormalizerSpec spec;
  ProtoReader r(bytes, at);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        spec.name = std::string(r.bytes());
        break;
      case 2:
        spec.precompiled_charsmap = r.bytes();
        break;
      case 3:
        spec.add_dummy_prefix = r.boolean();
        break;
      case 4:
        spec.remove_extra_whitespaces = r.boolean();
        break;
      case 5:
        spec.escape_whitespaces = r.boolean();
        break;
      default:
        break;
    }
  }
  return spec;
}

const char* model_type_name(int32_t type) {
  switch (type) {
    case 1:
      return "UNIGRAM";
    case 2:
      return "BPE";
    case 3:
      return "WORD";
    case 4:
      return "CHAR";
    default:
      return "unknown";
  }
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string_view model, const std::string& path)
    : path_(path) {
  TrainerSpec trainer;
  NormalizerSpec normalizer;
  ProtoReader r(model, path + ": ModelProto");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        REPRISE_CHECK(pieces_.size() < kMaxPieces, path, ": more than ", kMaxPieces, " pieces");
        pieces_.push_back(read_piece(
            r.bytes(), path + ": ModelProto.pieces[" + std::to_string(pieces_.size()) + "]"));
        break;
      case 2:
        trainer = read_trainer_spec(r.bytes(), path + ": ModelProto.trainer_spec");
        break;
      case 3:
        normalizer = read_normalizer_spec(r.bytes(), path + ": ModelProto.normalizer_spec");
        break;
      case 5: {
        const NormalizerSpec denormalizer =
            read_normalizer_spec(r.bytes(), path + ": ModelProto.denormalizer_spec");
        REPRISE_CHECK(denormalizer.precompiled_charsmap.empty(), path,
                      ": a denormalizer (denormalizer_spec with rules) is not supported");
        break;
      }
      default:
        break;
    }
  }
  REPRISE_CHECK(!pieces_.empty(), path, ": no pieces; expected a SentencePiece model (ModelProto)");
  REPRISE_CHECK(trainer.model_type == 2, path, ": model_type ", model_type_name(trainer.model_type),
                " (", trainer.model_type, ") is not supported; only BPE models are");
  byte_fallback_ = trainer.byte_fallback;
  unk_surface_ = trainer.unk_surface;
  add_dummy_prefix_ = normalizer.add_dummy_prefix;
  remove_extra_whitespaces_ = normalizer.remove_extra_whitespaces;

  std::vector<std::string> user_defined = index_pieces();
  rank_merges();
  space_word_start_ = space_word_start(normal_ids_);
  normalizer_.emplace(
      SentencePieceNormalizer::Spec{
          .precompiled_charsmap = normalizer.precompiled_charsmap,
          .add_dummy_prefix = normalizer.add_dummy_prefix,
          .remove_extra_whitespaces = normalizer.remove_extra_whitespaces,
          .escape_whitespaces = normalizer.escape_whitespaces,
          .treat_whitespace_as_suffix = trainer.treat_whitespace_as_suffix,
      },
      std::move(user_defined), path);

  // As SentencePieceProcessor::bos_id(): the named piece, if it is a control piece.
  auto control = [&](const std::string& name) -> std::optional<int64_t> {
    auto it = reserved_ids_.find(name);
    if (it == reserved_ids_.end() || pieces_[it->second].type != PieceType::control) return {};
    return it->second;
  };
  bos_ = control(trainer.bos_piece);
  eos_ = control(trainer.eos_piece);
}

// The checks SentencePiece makes when it loads a model, and two of ours:
// no unused pieces (SentencePiece re-splits them after merging; no BPE
// model we know has them) and no piece that is both kinds. Fills the
// piece maps, the unknown and byte ids; returns the user-defined pieces.
std::vector<std::string> SentencePieceTokenizer::index_pieces() {
  byte_ids_.fill(-1);
  std::vector<std::string> user_defined;
  for (int32_t id = 0; id < int32_t(pieces_.size()); ++id) {
    const Piece& p = pieces_[id];
    const std::string at = path_ + ": piece " + std::to_string(id);
    REPRISE_CHECK(!p.text.empty(), at, " is empty");
    REPRISE_CHECK(std::isfinite(p.score), at, " (\"", p.text, "\") has score ", p.score);
    REPRISE_CHECK(p.type != PieceType::unused, at, " (\"", p.text,
                  "\") is an unused piece, which is not supported");
    const bool normal = p.type == PieceType::normal || p.type == PieceType::user_defined;
    REPRISE_CHECK((normal ? normal_ids_ : reserved_ids_).emplace(p.text, id).second, at, " (\"",
                  p.text, "\") is already defined");
    if (p.type == PieceType::user_defined) user_defined.push_back(p.text);
    if (p.type == PieceType::unknown) {
      REPRISE_CHECK(unk_id_ < 0, at, " is a second unknown piece");
      unk_id_ = id;
    }
    if (p.type == PieceType::byte) {
      const int b = byte_of_token(p.text);
      REPRISE_CHECK(byte_fallback_, at, " is the byte piece \"", p.text,
                    "\" although byte_fallback is false");
      REPRISE_CHECK(b >= 0 && p.text == byte_token(uint8_t(b)), at, " is a byte piece \"", p.text,
                    "\", not of the form <0xAB>");
      byte_ids_[b] = id;
    }
  }
  for (const auto& [text, id] : normal_ids_) {
    REPRISE_CHECK(!reserved_ids_.contains(text), path_, ": piece \"", text,
                  "\" is both a normal and a control/unknown/byte piece");
  }
  REPRISE_CHECK(unk_id_ >= 0, path_, ": no unknown piece (type UNKNOWN)");
  REPRISE_CHECK(
      !byte_fallback_ || std::find(byte_ids_.begin(), byte_ids_.end(), -1) == byte_ids_.end(),
      path_, ": byte_fallback is true but not all 256 byte pieces <0x00>..<0xFF> exist");
  return user_defined;
}

// SentencePiece merges the pair whose concatenation is the piece with the
// highest score; as merge rules, each way to cut a piece into two pieces
// is a rule ranked by the piece's score (equal scores, equal ranks).
void SentencePieceTokenizer::rank_merges() {
  std::vector<float> scores;
  for (const auto& [text, id] : normal_ids_) scores.push_back(pieces_[id].score);
  std::sort(scores.begin(), scores.end(), std::greater<>());
  scores.erase(std::unique(scores.begin(), scores.end()), scores.end());
  for (const auto& [text, id] : normal_ids_) {
    const auto rank =
        std::lower_bound(scores.begin(), scores.end(), pieces_[id].score, std::greater<>()) -
        scores.begin();
    for (size_t cut = unicode::decode_utf8(text, 0).length; cut < text.size();
         cut += unicode::decode_utf8(text, cut).length) {
      auto left = normal_ids_.find(std::string_view(text).substr(0, cut));
      auto right = normal_ids_.find(std::string_view(text).substr(cut));
      if (left != normal_ids_.end() && right != normal_ids_.end()) {
        merges_.add(left->second, right->second, {int32_t(rank), id});
      }
    }
  }
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& path) {
  const std::string bytes = read_file(path, kMaxModelBytes, "a SentencePiece model");
  return std::make_unique<SentencePieceTokenizer>(bytes, path);
}

void SentencePieceTokenizer::encode_unknown(std::string_view piece,
                                            std::vector<int64_t>& ids) const {
  if (byte_fallback_) {
    for (char b : piece) ids.push_back(byte_ids_[uint8_t(b)]);
  } else if (ids.empty() || ids.back() != unk_id_) {
    ids.push_back(unk_id_);  // a run of unknown pieces is one unknown id
  }
}

void SentencePieceTokenizer::encode_run(std::string_view normalized, BpeWord& word,
                                        std::vector<int64_t>& ids) const {
  // A character that is no piece cannot be merged with a neighbour (no
  // piece holds a character the vocabulary lacks), so it ends a word of
  // symbols that merge among themselves.
  for (size_t pos = 0; pos < normalized.size();) {
    const std::string_view c = normalized.substr(pos, unicode::decode_utf8(normalized, pos).length);
    pos += c.size();
    auto it = normal_ids_.find(c);
    if (it != normal_ids_.end()) {
      word.push(it->second, ids);
    } else {
      word.end(ids);
      encode_unknown(c, ids);
    }
  }
  word.end(ids);
}

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int64_t> ids;
  if (add_special && bos_) ids.push_back(*bos_);
  const std::string normalized = normalizer_->normalize(text);
  const std::string_view n = normalized;
  BpeWord word(merges_, space_word_start_);
  size_t run = 0;  // start of the text since the last user-defined symbol
  for (size_t pos = 0; pos < n.size();) {
    if (const size_t length = normalizer_->user_defined_prefix(n.substr(pos))) {
      encode_run(n.substr(run, pos - run), word, ids);
      ids.push_back(normal_ids_.find(n.substr(pos, length))->second);
      pos += length;
      run = pos;
    } else {
      pos += unicode::decode_utf8(n, pos).length;
    }
  }
  encode_run(n.substr(run), word, ids);
  return ids;
}

std::string SentencePieceTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text, bytes;
  bool first = true;  // no piece has yet made text or dropped a leading "▁"
  for (int64_t id : ids) {
    REPRISE_CHECK(id >= 0 && id < vocab_size(), "decode: id ", id,
                  " is outside the vocabulary [0, ", vocab_size(), ") of ", path_);
    const Piece& p = pieces_[id];
    if (p.type == PieceType::byte) {
      bytes += char(byte_of_token(p.text));
      continue;
    }
    text += bytes;
    bytes.clear();
    if (!text.empty()) first = false;
    std::string_view piece = p.text;
    if (p.type == PieceType::control) continue;
    if (p.type == PieceType::unknown) {
      text += unk_surface_;
      continue;
    }
    if (first && (add_dummy_prefix_ || remove_extra_whitespaces_) &&
        piece.starts_with(kSpaceSymbol)) {
      piece.remove_prefix(kSpaceSymbol.size());
      // Without remove_extra_whitespaces only one "▁" is dropped.
      if (!remove_extra_whitespaces_) first = false;
    }
    for (size_t pos = 0; pos < piece.size();) {
      if (piece.substr(pos).starts_with(kSpaceSymbol)) {
        text += ' ';
        pos += kSpaceSymbol.size();
      } else {
        text += piece[pos++];
      }
    }
  }
  return text + bytes;
}

std::optional<int64_t> SentencePieceTokenizer::token_id(std::string_view token) const {
  if (auto it = reserved_ids_.find(token); it != reserved_ids_.end()) return it->second;
  if (auto it = normal_ids_.find(token); it != normal_ids_.end()) return it->second;
  return std::nullopt;
}

std::string SentencePieceTokenizer::describe() const {
  return path_ + ": SentencePiece BPE model, " + std::to_string(pieces_.size()) + " pieces" +
         (byte_fallback_ ? ", byte fallback" : "");
}

}  // namespace reprise::io
