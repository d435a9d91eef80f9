#pragma once
// Text <-> token ids with the tokenizer a model was trained with:
//
//   auto tok = io::load_tokenizer("Meta-Llama-3-8B/");   // or .../tokenizer.json, tokenizer.model
//   std::vector<int64_t> ids = tok->encode(text, /*add_special=*/true);   // BOS first for Llama
//   std::string back = tok->decode(ids);
//
// Two kinds are read: Hugging Face tokenizer.json files with a BPE model
// (GPT-2, Llama 3 and other byte-level BPEs; Llama 2's byte-fallback BPE),
// io/hf_tokenizer.h, and SentencePiece BPE models (Llama 2's
// tokenizer.model), io/sentencepiece.h. Both give the ids their reference
// library gives, and decode ids back to the bytes those libraries give,
// except that bytes that are not UTF-8 are returned as they are where the
// libraries put U+FFFD. A loaded tokenizer is immutable: encode and decode
// may run on several threads at once.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reprise::io {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text` (bytes; text that is not UTF-8 is encoded too, byte
  // by byte where it is ill-formed). add_special: also the special tokens
  // the tokenizer puts around a sequence (Llama's BOS), as Hugging Face's
  // add_special_tokens=True; false gives the text's ids alone.
  virtual std::vector<int64_t> encode(std::string_view text, bool add_special) const = 0;

  // The text of `ids`, special tokens included (Hugging Face's
  // skip_special_tokens=False; SentencePiece drops its control tokens). An
  // id outside [0, vocab_size()) or without a token raises an Error.
  virtual std::string decode(std::span<const int64_t> ids) const = 0;

  // One past the largest id: the number of embedding rows a model needs.
  virtual int64_t vocab_size() const = 0;

  // The beginning- and end-of-sequence tokens, when the files name them.
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual std::optional<int64_t> eos_id() const = 0;

  // The id of a token given by its vocabulary string (special tokens such
  // as "<|eot_id|>" included), if there is one.
  virtual std::optional<int64_t> token_id(std::string_view token) const = 0;

  // What was loaded, for logs: "tokenizer.json, BPE (byte-level), 128256 tokens".
  virtual std::string describe() const = 0;
};

// Loads the tokenizer at `path`: a tokenizer.json, a tokenizer.model, or a
// folder that holds either (tokenizer.json is preferred, as transformers
// does). The kind is read from the file's content, not its name. Raises
// Error naming the file and what was expected when it is missing,
// malformed or of an unsupported kind.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Whether `folder` holds a tokenizer.json or a tokenizer.model.
bool has_tokenizer(const std::string& folder);

// A file load_tokenizer reads, and its name in a model folder.
struct TokenizerFile {
  std::string path;
  std::string name;  // "tokenizer.json", "tokenizer_config.json" or "tokenizer.model"
};
// The files load_tokenizer(path) reads (a tokenizer.json and the
// tokenizer_config.json beside it when there is one, or a tokenizer.model),
// named as a model folder names them, so that copying them into one makes
// a folder that load_tokenizer reads the same way. Raises as load_tokenizer
// does when there is no such file.
std::vector<TokenizerFile> tokenizer_files(const std::string& path);

}  // namespace reprise::io
