#pragma once
// Training data for the example Llama: a byte-level tokenizer, the built-in
// generated corpus, and a text dataset with a held-out split, deterministic
// batch sampling and fixed evaluation windows.
//
// B = batch, T = sequence length. Token ids are bytes, 0..255, unless a
// dataset is given a tokenizer (io/tokenizer.h).
//
// The built-in corpus is a sequence of independent lines, each ending in
// '\n'. A line is
//   p = 1/2  a sentence  "<det> [<adj> ]<noun>[s] <verb>[s] <det> <noun>[s].\n"
//            subject and object are each singular or plural (1/2); the
//            determiner is "the" or "a" for a singular noun, "the" or "some"
//            for a plural one (1/2); the adjective is absent or one of 8
//            (1/9 each); nouns and verbs are one of 8 each; the verb agrees
//            with the subject ("the cat sees", "the cats see");
//   p = 1/4  a sum       "<a> + <b> = <a+b>\n", a and b uniform in 0..99;
//   p = 1/4  a copy      "copy <w> : <w>\n", w 4..8 letters (uniform length),
//            each uniform in a..z.
// Different choices spell different lines and no line contains '\n' but at
// its end, so the byte stream's entropy rate is exactly
// H(line) / E[line length]; corpus_entropy() computes both from the word
// lists the generator uses. That rate is the loss (nats per byte) a perfect
// model approaches; a model that has learned the grammar but cannot copy or
// add pays H(w) a second time per copy and H(a + b) per sum on top.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "io/tokenizer.h"
#include "rng/generator.h"

namespace reprise::nn {

inline constexpr int64_t kByteVocabSize = 256;

// Byte-level tokenizer: token i is byte i. decode() maps ids outside 0..255
// to '?'.
std::vector<int64_t> encode_bytes(std::string_view text);
std::string decode_bytes(const std::vector<int64_t>& ids);

// ---- The built-in corpus -------------------------------------------------

inline constexpr uint64_t kCorpusSeed = 20261202;
inline constexpr int64_t kCorpusBytes = int64_t(1) << 21;  // 2 MiB

// Whole lines of the grammar above, drawn from Philox stream "corpus" of
// `seed`, until the text has at least `min_bytes` bytes. Same seed, same text.
std::string generate_corpus(uint64_t seed, int64_t min_bytes);

struct CorpusEntropy {
  double line_nats = 0;          // H(line)
  double mean_line_bytes = 0;    // E[line length], '\n' included
  double nats_per_byte = 0;      // the entropy rate: line_nats / mean_line_bytes
  double grammar_only_nats = 0;  // per byte, for a model that cannot copy or add
  double uniform_nats = 0;       // ln 256
};
// Exact, from the generator's word lists.
CorpusEntropy corpus_entropy();

// The corpus vocabulary, for tests that parse generated lines.
struct CorpusLexicon {
  std::vector<std::string> adjectives, nouns, verbs;
};
const CorpusLexicon& corpus_lexicon();

// ---- Datasets --------------------------------------------------------------

// input_ids and labels: i64 (B, T), B windows of T tokens of the text, and
// labels equal to input_ids: Hugging Face's causal-LM convention, in which
// the loss shifts (logits at t are scored against labels[t + 1];
// LlamaForCausalLM::loss), so a batch dumped here gives the same loss in
// transformers. labels is its own tensor, so a caller may mask it (-100).
struct Batch {
  Tensor input_ids;
  Tensor labels;
};

// How a dataset's text becomes ids: bytes when `tokenizer` is null (the
// default), else the tokenizer loaded from `path` (which checkpoints
// record).
struct DataTokenizer {
  std::string path;
  std::shared_ptr<const io::Tokenizer> tokenizer;

  // io::load_tokenizer(path).
  static DataTokenizer load(const std::string& path);
  bool is_bytes() const { return tokenizer == nullptr; }
  // Ids a model needs embedding rows for: 256 for bytes.
  int64_t vocab_size() const;
  // "bytes" or the tokenizer's describe().
  std::string describe() const;
};

// Where one document of a text ends, for a tokenizer: each is encoded on its
// own with the tokenizer's special tokens (Llama's BOS) and followed by EOS
// when the tokenizer has one. Bytes ignore it.
enum class Documents {
  whole,  // the text is one document (a file)
  lines,  // every line, its '\n' included, is one (the built-in corpus)
};

// A text as token ids, split into a training part (the first tokens) and a
// held-out part (the last round(val_fraction * tokens) tokens). With bytes
// (the default) the tokens are the text's bytes.
class TextDataset {
 public:
  TextDataset(std::string name, std::string text, double val_fraction,
              const DataTokenizer& tokenizer = {}, Documents documents = Documents::whole);

  // A file. Raises an Error naming the path when it cannot be read.
  static TextDataset from_file(const std::string& path, double val_fraction = 0.1,
                               const DataTokenizer& tokenizer = {});
  // The built-in corpus, one document per line.
  static TextDataset builtin(uint64_t seed = kCorpusSeed, int64_t min_bytes = kCorpusBytes,
                             double val_fraction = 0.1, const DataTokenizer& tokenizer = {});

  const std::string& name() const { return name_; }
  // The file it was read from; empty for other texts.
  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }
  const DataTokenizer& tokenizer() const { return tokenizer_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t num_tokens() const { return int64_t(tokens_.size()); }
  int64_t train_size() const { return train_size_; }  // tokens
  int64_t val_size() const { return num_tokens() - train_size_; }
  // 64-bit FNV-1a of the text and the split point, and with a tokenizer of
  // the ids too: a checkpoint records it so that resuming on different data,
  // or with another tokenizer, is refused.
  uint64_t fingerprint() const { return fingerprint_; }

  // B training windows of T tokens at offsets uniform over the training
  // part, two words per window from `stream` of `gen`: the stream's offset is
  // the data position, so saving the generator state saves it. Under a
  // sample slice of `gen` (rng::SampleSlice) they are rows first .. first +
  // B - 1 of the global batch's windows, whoever reads them.
  Batch sample(int64_t batch, int64_t seq, rng::Generator& gen,
               std::string_view stream = "data") const;

  // Held-out windows: window w covers tokens [w T, w T + T) of the held-out
  // part, so windows do not overlap and the same index always gives the same
  // tokens. num_val_windows(T) = val_size / T of them fit.
  int64_t num_val_windows(int64_t seq) const;
  // Windows first .. first + batch - 1 (B = batch).
  Batch val_batch(int64_t first, int64_t batch, int64_t seq) const;

 private:
  Batch windows(const std::vector<int64_t>& starts, int64_t seq) const;

  std::string name_;
  std::string path_;
  std::string text_;
  DataTokenizer tokenizer_;
  std::vector<int32_t> tokens_;
  int64_t train_size_ = 0;
  uint64_t fingerprint_ = 0;
};

}  // namespace reprise::nn
