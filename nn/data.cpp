#include "nn/data.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "engine/threads.h"
#include "rng/words.h"

namespace reprise::nn {

std::vector<int64_t> encode_bytes(std::string_view text) {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = int64_t(static_cast<unsigned char>(text[i]));
  return ids;
}

std::string decode_bytes(const std::vector<int64_t>& ids) {
  std::string text(ids.size(), '?');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && ids[i] < kByteVocabSize) text[i] = char(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

// ---- The built-in corpus -------------------------------------------------

namespace {

// Plurals and third-person verbs add an "s"; none of these words ends in one,
// and no word is another's prefix-plus-s, so every line parses one way.
const CorpusLexicon kLexicon{
    {"big", "small", "red", "old", "young", "happy", "quiet", "green"},
    {"cat", "dog", "bird", "frog", "horse", "farmer", "robot", "teacher"},
    {"see", "like", "chase", "help", "find", "follow", "visit", "call"},
};
constexpr const char* kSingularDet[2] = {"the", "a"};
constexpr const char* kPluralDet[2] = {"the", "some"};
constexpr int kMaxAddend = 99;
constexpr int kMinCopy = 4;
constexpr int kMaxCopy = 8;
constexpr int kLetters = 26;

// Exactly uniform integers from one Philox stream, read in order.
class Draws {
 public:
  explicit Draws(uint64_t seed)
      : seed_(seed), subsequence_(rng::Generator::subsequence_of("corpus")) {}

  // Uniform on [0, n): rejects the lowest 2^32 mod n words so that the rest
  // divide evenly into n classes.
  uint32_t below(uint32_t n) {
    const uint32_t reject = uint32_t(-n) % n;
    uint32_t w = word();
    while (w < reject) w = word();
    return w % n;
  }

 private:
  uint32_t word() {
    if (next_ == buffer_.size()) {
      rng::generate_words(seed_, subsequence_, offset_, buffer_.data(), buffer_.size());
      offset_ += buffer_.size();
      next_ = 0;
    }
    return buffer_[next_++];
  }

  uint64_t seed_;
  uint64_t subsequence_;
  uint64_t offset_ = 0;
  std::vector<uint32_t> buffer_ = std::vector<uint32_t>(4096);
  size_t next_ = buffer_.size();
};

void append_noun_phrase(std::string& out, Draws& d, bool with_adjective, bool& plural) {
  plural = d.below(2) == 1;
  out += plural ? kPluralDet[d.below(2)] : kSingularDet[d.below(2)];
  out += ' ';
  if (with_adjective) {
    const uint32_t adj = d.below(uint32_t(kLexicon.adjectives.size()) + 1);
    if (adj > 0) {
      out += kLexicon.adjectives[adj - 1];
      out += ' ';
    }
  }
  out += kLexicon.nouns[d.below(uint32_t(kLexicon.nouns.size()))];
  if (plural) out += 's';
}

void append_sentence(std::string& out, Draws& d) {
  bool subject_plural = false;
  append_noun_phrase(out, d, true, subject_plural);
  out += ' ';
  out += kLexicon.verbs[d.below(uint32_t(kLexicon.verbs.size()))];
  if (!subject_plural) out += 's';
  out += ' ';
  bool object_plural = false;
  append_noun_phrase(out, d, false, object_plural);
  out += ".\n";
}

void append_sum(std::string& out, Draws& d) {
  const uint32_t a = d.below(kMaxAddend + 1);
  const uint32_t b = d.below(kMaxAddend + 1);
  out += std::to_string(a) + " + " + std::to_string(b) + " = " + std::to_string(a + b) + "\n";
}

void append_copy(std::string& out, Draws& d) {
  const uint32_t len = kMinCopy + d.below(kMaxCopy - kMinCopy + 1);
  std::string w(len, 'a');
  for (auto& c : w) c = char('a' + d.below(kLetters));
  out += "copy " + w + " : " + w + "\n";
}

double mean_length(const std::vector<std::string>& words) {
  double total = 0;
  for (const auto& w : words) total += double(w.size());
  return total / double(words.size());
}

int digits(int v) { return v < 10 ? 1 : v < 100 ? 2 : 3; }

}  // namespace

const CorpusLexicon& corpus_lexicon() { return kLexicon; }

std::string generate_corpus(uint64_t seed, int64_t min_bytes) {
  REPRISE_CHECK(min_bytes >= 0, "generate_corpus: min_bytes must be >= 0, got ", min_bytes);
  Draws d(seed);
  std::string out;
  out.reserve(size_t(min_bytes) + 64);
  while (int64_t(out.size()) < min_bytes) {
    // 0, 1: sentence (p = 1/2); 2: sum; 3: copy.
    switch (d.below(4)) {
      case 0:
      case 1:
        append_sentence(out, d);
        break;
      case 2:
        append_sum(out, d);
        break;
      default:
        append_copy(out, d);
        break;
    }
  }
  return out;
}

CorpusEntropy corpus_entropy() {
  const double n_adj = double(kLexicon.adjectives.size());
  const double n_noun = double(kLexicon.nouns.size());
  const double n_verb = double(kLexicon.verbs.size());

  // Sentence: (number, determiner) twice, adjective or none, two nouns, a verb.
  const double sentence_nats =
      2 * std::log(4.0) + std::log(n_adj + 1) + 2 * std::log(n_noun) + std::log(n_verb);
  const double det_bytes = 0.5 * (3 + 1) / 2.0 + 0.5 * (3 + 4) / 2.0;  // the/a, the/some
  const double adj_bytes = (mean_length(kLexicon.adjectives) + 1) * n_adj / (n_adj + 1);
  const double noun_bytes = mean_length(kLexicon.nouns) + 0.5;  // plural "s" half the time
  const double verb_bytes = mean_length(kLexicon.verbs) + 0.5;  // agreement "s" half the time
  // det ' ' [adj ' '] noun ' ' verb ' ' det ' ' noun ".\n"
  const double sentence_bytes =
      det_bytes + 1 + adj_bytes + noun_bytes + 1 + verb_bytes + 1 + det_bytes + 1 + noun_bytes + 2;

  // Sum: a and b uniform; H(a + b) from its exact distribution.
  const int n = kMaxAddend + 1;
  std::vector<double> sum_count(2 * kMaxAddend + 1, 0.0);
  double sum_bytes = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      sum_bytes += digits(a) + digits(b) + digits(a + b) + 7;  // " + ", " = ", "\n"
      sum_count[size_t(a + b)] += 1;
    }
  }
  sum_bytes /= double(n) * n;
  const double sum_nats = 2 * std::log(double(n));
  double answer_nats = 0;
  for (double c : sum_count) {
    const double p = c / (double(n) * n);
    if (p > 0) answer_nats -= p * std::log(p);
  }

  // Copy: a length and that many letters; "copy " w " : " w "\n".
  const double mean_copy = (kMinCopy + kMaxCopy) / 2.0;
  const double copy_nats =
      std::log(double(kMaxCopy - kMinCopy + 1)) + mean_copy * std::log(double(kLetters));
  const double copy_bytes = 5 + mean_copy + 3 + mean_copy + 1;

  const double template_nats = -(0.5 * std::log(0.5) + 2 * 0.25 * std::log(0.25));
  CorpusEntropy e;
  e.line_nats = template_nats + 0.5 * sentence_nats + 0.25 * sum_nats + 0.25 * copy_nats;
  e.mean_line_bytes = 0.5 * sentence_bytes + 0.25 * sum_bytes + 0.25 * copy_bytes;
  e.nats_per_byte = e.line_nats / e.mean_line_bytes;
  // Without copying, the second w costs H(w) again; without adding, the
  // answer costs H(a + b).
  e.grammar_only_nats = (e.line_nats + 0.25 * copy_nats + 0.25 * answer_nats) / e.mean_line_bytes;
  e.uniform_nats = std::log(double(kByteVocabSize));
  return e;
}

// ---- Datasets --------------------------------------------------------------

namespace {

uint64_t fnv1a(uint64_t h, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

// The documents of `text`, each a view into it.
std::vector<std::string_view> split_documents(std::string_view text, Documents documents) {
  if (documents == Documents::whole) return {text};
  std::vector<std::string_view> out;
  for (size_t begin = 0; begin < text.size();) {
    const size_t nl = text.find('\n', begin);
    const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    out.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return out;
}

// Each document's ids (special tokens included) and EOS when the tokenizer
// has one, concatenated in document order. Documents are encoded on the
// thread pool; the result does not depend on the thread count.
std::vector<int32_t> encode_documents(const io::Tokenizer& tok,
                                      const std::vector<std::string_view>& docs) {
  std::vector<std::vector<int64_t>> ids(docs.size());
  const std::optional<int64_t> eos = tok.eos_id();
  threads::parallel_for(int64_t(docs.size()), 64, [&](int64_t d0, int64_t d1) {
    for (int64_t d = d0; d < d1; ++d) {
      ids[size_t(d)] = tok.encode(docs[size_t(d)], /*add_special=*/true);
      if (eos) ids[size_t(d)].push_back(*eos);
    }
  });
  std::vector<int32_t> out;
  for (const std::vector<int64_t>& doc : ids) out.insert(out.end(), doc.begin(), doc.end());
  return out;
}

}  // namespace

DataTokenizer DataTokenizer::load(const std::string& path) {
  return {.path = path, .tokenizer = io::load_tokenizer(path)};
}

int64_t DataTokenizer::vocab_size() const {
  return tokenizer ? tokenizer->vocab_size() : kByteVocabSize;
}

std::string DataTokenizer::describe() const { return tokenizer ? tokenizer->describe() : "bytes"; }

TextDataset::TextDataset(std::string name, std::string text, double val_fraction,
                         const DataTokenizer& tokenizer, Documents documents)
    : name_(std::move(name)), text_(std::move(text)), tokenizer_(tokenizer) {
  REPRISE_CHECK(val_fraction >= 0 && val_fraction < 1, "TextDataset(", name_,
                "): val_fraction must be in [0, 1), got ", val_fraction);
  REPRISE_CHECK(!text_.empty(), "TextDataset(", name_, "): the text is empty");
  if (tokenizer_.is_bytes()) {
    tokens_.assign(reinterpret_cast<const unsigned char*>(text_.data()),
                   reinterpret_cast<const unsigned char*>(text_.data()) + text_.size());
  } else {
    tokens_ = encode_documents(*tokenizer_.tokenizer, split_documents(text_, documents));
  }
  const int64_t size = num_tokens();
  train_size_ = size - int64_t(std::llround(val_fraction * double(size)));
  uint64_t h = fnv1a(0xCBF29CE484222325ull, text_.data(), text_.size());
  if (!tokenizer_.is_bytes()) h = fnv1a(h, tokens_.data(), tokens_.size() * sizeof(int32_t));
  fingerprint_ = fnv1a(h, &train_size_, sizeof(train_size_));
}

TextDataset TextDataset::from_file(const std::string& path, double val_fraction,
                                   const DataTokenizer& tokenizer) {
  std::ifstream in(path, std::ios::binary);
  REPRISE_CHECK(in.good(), "TextDataset: cannot open data file '", path, "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  REPRISE_CHECK(!in.bad(), "TextDataset: error reading data file '", path, "'");
  TextDataset d(path, bytes.str(), val_fraction, tokenizer, Documents::whole);
  d.path_ = path;
  return d;
}

TextDataset TextDataset::builtin(uint64_t seed, int64_t min_bytes, double val_fraction,
                                 const DataTokenizer& tokenizer) {
  return TextDataset("built-in corpus (seed " + std::to_string(seed) + ")",
                     generate_corpus(seed, min_bytes), val_fraction, tokenizer, Documents::lines);
}

Batch TextDataset::windows(const std::vector<int64_t>& starts, int64_t seq) const {
  const int64_t batch = int64_t(starts.size());
  Tensor ids = Tensor::empty({batch, seq}, DType::i64);
  Tensor labels = Tensor::empty({batch, seq}, DType::i64);
  int64_t* pi = ids.data<int64_t>();
  int64_t* pl = labels.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t* w = tokens_.data() + starts[size_t(b)];
    for (int64_t t = 0; t < seq; ++t) pi[b * seq + t] = pl[b * seq + t] = w[t];
  }
  return {ids, labels};
}

Batch TextDataset::sample(int64_t batch, int64_t seq, rng::Generator& gen,
                          std::string_view stream) const {
  REPRISE_CHECK(batch >= 1 && seq >= 1, "TextDataset::sample: batch and seq must be >= 1, got ",
                batch, " and ", seq);
  REPRISE_CHECK(train_size_ >= seq, "TextDataset::sample(", name_, "): the training part has ",
                train_size_, " tokens, fewer than seq = ", seq);
  // Window starts 0 .. train_size - seq. x % range from 64 random bits is
  // biased by at most range / 2^64 (below 1e-10 for any text that fits in memory).
  const uint64_t range = uint64_t(train_size_ - seq + 1);
  const rng::Reservation r = gen.reserve(stream, uint64_t(2 * batch));
  std::vector<uint32_t> words(size_t(2 * batch));
  rng::generate_words(r.seed, r.subsequence, r.offset, words.data(), words.size());
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t x = uint64_t(words[size_t(2 * b)]) | uint64_t(words[size_t(2 * b + 1)]) << 32;
    starts[size_t(b)] = int64_t(x % range);
  }
  return windows(starts, seq);
}

int64_t TextDataset::num_val_windows(int64_t seq) const {
  REPRISE_CHECK(seq >= 1, "TextDataset::num_val_windows: seq must be >= 1, got ", seq);
  return val_size() / seq;
}

Batch TextDataset::val_batch(int64_t first, int64_t batch, int64_t seq) const {
  const int64_t available = num_val_windows(seq);
  REPRISE_CHECK(batch >= 1 && first >= 0 && first + batch <= available, "TextDataset::val_batch(",
                name_, "): windows ", first, "..", first + batch - 1, " of length ", seq,
                " requested, but the held-out part (", val_size(), " tokens) has ", available);
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) starts[size_t(b)] = train_size_ + (first + b) * seq;
  return windows(starts, seq);
}

}  // namespace reprise::nn
