// The byte tokenizer, the built-in corpus (determinism, the grammar it
// states, its entropy figures) and TextDataset (split, sampling, held-out
// windows, errors).

#include "nn/data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"

namespace reprise::nn {
namespace {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[size_t(i)] = char(i);
  const std::vector<int64_t> ids = encode_bytes(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(ids[size_t(i)], i);
  EXPECT_EQ(decode_bytes(ids), all);
  EXPECT_EQ(decode_bytes({104, 105, 300, -1}), "hi??");
}

TEST(Corpus, IsDeterministicAndGrowsByWholeLines) {
  const std::string a = generate_corpus(7, 20000);
  EXPECT_EQ(a, generate_corpus(7, 20000));
  EXPECT_NE(a, generate_corpus(8, 20000));
  ASSERT_GE(a.size(), 20000u);
  EXPECT_EQ(a.back(), '\n');
  // The text is one sequence of lines: a shorter request is a prefix.
  const std::string b = generate_corpus(7, 5000);
  EXPECT_EQ(a.compare(0, b.size(), b), 0);
  EXPECT_TRUE(generate_corpus(7, 0).empty());
}

// A line parsed back into the grammar's choices, with the probability the
// grammar gives it.
struct Parsed {
  char kind;  // 's' sentence, '+' sum, 'c' copy
  double log_p;
  int copy_length = 0;
};

int index_of(const std::vector<std::string>& words, const std::string& w) {
  auto it = std::find(words.begin(), words.end(), w);
  return it == words.end() ? -1 : int(it - words.begin());
}

bool parse_number(const std::string& s, int& v) {
  if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  v = std::stoi(s);
  return true;
}

std::vector<std::string> split_spaces(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// noun[s] with its number; nullopt when not a noun.
std::optional<bool> noun_plural(const std::string& w) {
  const auto& nouns = corpus_lexicon().nouns;
  if (index_of(nouns, w) >= 0) return false;
  if (!w.empty() && w.back() == 's' && index_of(nouns, w.substr(0, w.size() - 1)) >= 0) return true;
  return std::nullopt;
}

bool det_agrees(const std::string& det, bool plural) {
  return det == "the" || det == (plural ? "some" : "a");
}

std::optional<Parsed> parse_line(const std::string& line) {
  const auto& lex = corpus_lexicon();
  const std::vector<std::string> w = split_spaces(line);
  if (line.empty() || line.find("  ") != std::string::npos || line.front() == ' ') {
    return std::nullopt;
  }
  if (w.size() == 4 && w[0] == "copy" && w[2] == ":" && w[1] == w[3]) {
    const int len = int(w[1].size());
    if (len < 4 || len > 8) return std::nullopt;
    for (char c : w[1])
      if (c < 'a' || c > 'z') return std::nullopt;
    return Parsed{'c', std::log(0.25 / 5) - len * std::log(26.0), len};
  }
  if (w.size() == 5 && w[1] == "+" && w[3] == "=") {
    int a = 0, b = 0, c = 0;
    if (!parse_number(w[0], a) || !parse_number(w[2], b) || !parse_number(w[4], c)) {
      return std::nullopt;
    }
    if (a > 99 || b > 99 || c != a + b) return std::nullopt;
    return Parsed{'+', std::log(0.25 / 10000)};
  }
  // det [adj] noun verb det noun.
  if ((w.size() != 5 && w.size() != 6) || w.back().back() != '.') return std::nullopt;
  std::vector<std::string> t = w;
  t.back().pop_back();
  const bool has_adj = t.size() == 6;
  if (has_adj && index_of(lex.adjectives, t[1]) < 0) return std::nullopt;
  const size_t noun = has_adj ? 2 : 1;
  const auto subject_plural = noun_plural(t[noun]);
  const auto object_plural = noun_plural(t[noun + 3]);
  if (!subject_plural || !object_plural) return std::nullopt;
  if (!det_agrees(t[0], *subject_plural) || !det_agrees(t[noun + 2], *object_plural)) {
    return std::nullopt;
  }
  const std::string verb =
      *subject_plural ? t[noun + 1] : t[noun + 1].substr(0, t[noun + 1].size() - 1);
  if (!*subject_plural && t[noun + 1].back() != 's') return std::nullopt;
  if (index_of(lex.verbs, verb) < 0) return std::nullopt;
  const double log_p = std::log(0.5) + 2 * std::log(0.25) - std::log(9.0) - 3 * std::log(8.0);
  return Parsed{'s', log_p};
}

TEST(Corpus, EveryLineFollowsTheStatedGrammar) {
  const std::string text = generate_corpus(kCorpusSeed, 400000);
  std::istringstream in(text);
  int64_t lines = 0, sentences = 0, sums = 0, copies = 0, bytes = 0;
  double neg_log_p = 0;
  std::set<int> copy_lengths;
  for (std::string line; std::getline(in, line);) {
    const auto p = parse_line(line);
    ASSERT_TRUE(p.has_value()) << "line " << lines << " does not parse: '" << line << "'";
    ++lines;
    bytes += int64_t(line.size()) + 1;
    neg_log_p -= p->log_p;
    sentences += p->kind == 's';
    sums += p->kind == '+';
    copies += p->kind == 'c';
    if (p->kind == 'c') copy_lengths.insert(p->copy_length);
  }
  ASSERT_GT(lines, 10000);
  // Template frequencies 1/2, 1/4, 1/4 within 5 standard deviations.
  const double n = double(lines);
  EXPECT_NEAR(sentences / n, 0.5, 5 * std::sqrt(0.25 / n));
  EXPECT_NEAR(sums / n, 0.25, 5 * std::sqrt(0.1875 / n));
  EXPECT_NEAR(copies / n, 0.25, 5 * std::sqrt(0.1875 / n));
  EXPECT_EQ(copy_lengths, (std::set<int>{4, 5, 6, 7, 8}));

  // The sample means of -ln p(line) and of the line length estimate the
  // exact H(line) and E[length] that corpus_entropy() states (the per-line
  // standard deviations are below 6 nats and 8 bytes).
  const CorpusEntropy e = corpus_entropy();
  EXPECT_NEAR(neg_log_p / n, e.line_nats, 5 * 6 / std::sqrt(n));
  EXPECT_NEAR(double(bytes) / n, e.mean_line_bytes, 5 * 8 / std::sqrt(n));
}

TEST(Corpus, EntropyFigures) {
  const CorpusEntropy e = corpus_entropy();
  EXPECT_DOUBLE_EQ(e.uniform_nats, std::log(256.0));
  EXPECT_DOUBLE_EQ(e.nats_per_byte, e.line_nats / e.mean_line_bytes);
  // The stated learnable structure: far below the uniform baseline, and
  // copying and adding are worth a visible part of it.
  EXPECT_GT(e.nats_per_byte, 0.4);
  EXPECT_LT(e.nats_per_byte, 0.8);
  EXPECT_GT(e.grammar_only_nats, e.nats_per_byte + 0.2);
  EXPECT_LT(e.grammar_only_nats, 1.5);
  // The figures docs/training.md and llama_train print.
  EXPECT_NEAR(e.line_nats, 14.236, 5e-4);
  EXPECT_NEAR(e.mean_line_bytes, 24.218, 5e-4);
  EXPECT_NEAR(e.nats_per_byte, 0.5878, 5e-5);
  EXPECT_NEAR(e.grammar_only_nats, 0.8589, 5e-5);
}

TEST(TextDataset, SplitsOffTheHeldOutTail) {
  const TextDataset d("t", std::string(1000, 'x'), 0.1);
  EXPECT_EQ(d.train_size(), 900);
  EXPECT_EQ(d.val_size(), 100);
  EXPECT_EQ(d.num_val_windows(9), 11);  // 100 / 9
  EXPECT_EQ(TextDataset("t", std::string(1000, 'x'), 0.0).val_size(), 0);
  // The fingerprint covers the text and the split.
  EXPECT_NE(d.fingerprint(), TextDataset("t", std::string(1000, 'y'), 0.1).fingerprint());
  EXPECT_NE(d.fingerprint(), TextDataset("t", std::string(1000, 'x'), 0.2).fingerprint());
  EXPECT_EQ(d.fingerprint(), TextDataset("other name", std::string(1000, 'x'), 0.1).fingerprint());
}

TEST(TextDataset, SamplesWindowsOfTheTrainingPartFromTheDataStream) {
  const TextDataset d = TextDataset::builtin(kCorpusSeed, 50000);
  rng::Generator g1(42), g2(42);
  const Batch a = d.sample(4, 16, g1);
  const Batch b = d.sample(4, 16, g2);
  ASSERT_EQ(a.input_ids.shape(), (Shape{4, 16}));
  ASSERT_EQ(a.labels.shape(), (Shape{4, 16}));
  EXPECT_EQ(a.input_ids.dtype(), DType::i64);
  EXPECT_EQ(a.input_ids.to_vector<int64_t>(), b.input_ids.to_vector<int64_t>());
  EXPECT_EQ(a.labels.to_vector<int64_t>(), b.labels.to_vector<int64_t>());
  // Two words per window from stream "data", nothing from any other.
  EXPECT_EQ(g1.offset("data"), 8u);
  EXPECT_EQ(g1.state().streams.size(), 1u);

  // Hugging Face's convention: labels are the inputs (the loss shifts), in
  // a tensor of their own.
  const std::string train = d.text().substr(0, size_t(d.train_size()));
  const auto ids = a.input_ids.to_vector<int64_t>();
  EXPECT_EQ(a.labels.to_vector<int64_t>(), ids);
  EXPECT_NE(a.labels.storage(), a.input_ids.storage());
  for (int r = 0; r < 4; ++r) {
    const std::vector<int64_t> window(ids.begin() + r * 16, ids.begin() + r * 16 + 16);
    EXPECT_NE(train.find(decode_bytes(window)), std::string::npos) << "row " << r;
  }

  // The next batch differs; restoring the generator state replays it.
  const rng::GeneratorState saved = g1.state();
  const Batch next = d.sample(4, 16, g1);
  EXPECT_NE(next.input_ids.to_vector<int64_t>(), ids);
  rng::Generator g3(1);
  g3.set_state(saved);
  EXPECT_EQ(d.sample(4, 16, g3).input_ids.to_vector<int64_t>(),
            next.input_ids.to_vector<int64_t>());
}

// Under a sample slice each process or micro-batch reads its rows of the
// global batch, and the data stream moves as for the whole batch.
TEST(TextDataset, ASampleSliceReadsItsRowsOfTheGlobalBatch) {
  const TextDataset d = TextDataset::builtin(kCorpusSeed, 50000);
  rng::Generator whole_gen(42), part_gen(42);
  const std::vector<int64_t> whole = d.sample(6, 16, whole_gen).input_ids.to_vector<int64_t>();
  const rng::SampleSliceGuard slice(part_gen, {.first = 4, .count = 2, .total = 6});
  const std::vector<int64_t> part = d.sample(2, 16, part_gen).input_ids.to_vector<int64_t>();
  EXPECT_EQ(part, std::vector<int64_t>(whole.begin() + 4 * 16, whole.end()));
  EXPECT_EQ(part_gen.offset("data"), whole_gen.offset("data"));
}

TEST(TextDataset, SamplingCoversTheTrainingPartOnly) {
  std::string text(200, 'a');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char(i < 100 ? 'a' + i % 26 : 'Z');
  const TextDataset d("t", text, 0.5);
  rng::Generator g(3);
  std::set<int64_t> firsts;
  for (int i = 0; i < 50; ++i) {
    const Batch b = d.sample(8, 10, g);
    const auto ids = b.input_ids.to_vector<int64_t>();
    for (int64_t v : ids) EXPECT_NE(v, 'Z');
    for (int r = 0; r < 8; ++r) firsts.insert(ids[size_t(r * 10)]);
  }
  EXPECT_EQ(firsts.size(), 26u);  // every start class is reached
  // The last possible window ends exactly at the split.
  const TextDataset exact("t", text.substr(0, 110), 10.0 / 110);
  const Batch last = exact.sample(3, 100, g);
  EXPECT_EQ(last.input_ids.to_vector<int64_t>()[0], 'a');
}

TEST(TextDataset, HeldOutWindowsAreFixedAndContiguous) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + i % 26);
  const TextDataset d("t", text, 0.25);
  EXPECT_EQ(d.num_val_windows(10), 25);  // the last 250 bytes
  const Batch b = d.val_batch(2, 3, 10);
  const auto ids = b.input_ids.to_vector<int64_t>();
  EXPECT_EQ(b.labels.to_vector<int64_t>(), ids);
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t < 10; ++t) {
      EXPECT_EQ(ids[size_t(r * 10 + t)], text[size_t(750 + (2 + r) * 10 + t)]);
    }
  }
  EXPECT_EQ(d.val_batch(2, 3, 10).input_ids.to_vector<int64_t>(), ids);
  EXPECT_NO_THROW(d.val_batch(22, 3, 10));
  EXPECT_THROW(d.val_batch(23, 3, 10), Error);
}

TEST(TextDataset, RejectsBadInputWithClearErrors) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              TextDataset::from_file("/nonexistent/corpus.txt");
            }).find("/nonexistent/corpus.txt"),
            std::string::npos);
  EXPECT_NE(message([] { TextDataset("t", "abc", 1.0); }).find("val_fraction"), std::string::npos);
  EXPECT_NE(message([] { TextDataset("t", "", 0.1); }).find("empty"), std::string::npos);
  const TextDataset small("small.txt", std::string(20, 'x'), 0.5);
  rng::Generator g;
  EXPECT_NE(message([&] { small.sample(2, 11, g); }).find("fewer than seq"), std::string::npos);
  EXPECT_NE(message([&] { small.val_batch(0, 2, 10); }).find("held-out"), std::string::npos);
}

// The byte path is the one checkpoints were made with: its split and
// fingerprint (FNV-1a of the text, then of the split point) do not change.
TEST(TextDataset, BytesAreTheTokensAndTheFingerprintIsStable) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += "hello world\n";
  const TextDataset d("t", text, 0.1);
  EXPECT_TRUE(d.tokenizer().is_bytes());
  EXPECT_EQ(d.tokenizer().vocab_size(), 256);
  EXPECT_EQ(d.train_size(), 108);
  EXPECT_EQ(d.fingerprint(), 0x8c3daf22b037a811ull);
  EXPECT_EQ(std::vector<int64_t>(d.tokens().begin(), d.tokens().end()), encode_bytes(text));
}

// With a tokenizer, every document (a line of the built-in corpus, or a
// whole file) is encoded with its special tokens and ends in EOS.
TEST(TextDataset, EncodesEachDocumentAndEndsItWithEos) {
  const std::string dir = std::string(REPRISE_FIXTURES_DIR) + "/tokenizers/";
  const DataTokenizer sp = DataTokenizer::load(dir + "llama2_sp");  // BOS 1, EOS 2
  const TextDataset d = TextDataset::builtin(kCorpusSeed, 3000, 0.25, sp);
  std::vector<int32_t> want;
  std::istringstream lines(d.text());
  for (std::string line; std::getline(lines, line);) {
    for (int64_t id : sp.tokenizer->encode(line + "\n", true)) want.push_back(int32_t(id));
    want.push_back(2);
  }
  EXPECT_EQ(d.tokens(), want);
  EXPECT_EQ(want.front(), 1);
  EXPECT_EQ(d.train_size(), d.num_tokens() - std::llround(0.25 * double(d.num_tokens())));
  EXPECT_EQ(d.tokenizer().vocab_size(), 600);

  // A file is one document. GPT-2's tokenizer has no BOS or EOS.
  const DataTokenizer gpt2 = DataTokenizer::load(dir + "gpt2_bpe");
  const TextDataset whole("t", "one line\ntwo lines\n", 0.0, gpt2);
  EXPECT_EQ(whole.num_tokens(),
            int64_t(gpt2.tokenizer->encode("one line\ntwo lines\n", true).size()));

  // Windows hold ids; the fingerprint tells tokenizers (and bytes) apart.
  rng::Generator g(3);
  const Batch b = d.sample(2, 16, g);
  for (int64_t id : b.input_ids.to_vector<int64_t>()) EXPECT_LT(id, 600);
  const TextDataset again = TextDataset::builtin(kCorpusSeed, 3000, 0.25, sp);
  EXPECT_EQ(again.fingerprint(), d.fingerprint());
  EXPECT_NE(TextDataset::builtin(kCorpusSeed, 3000, 0.25).fingerprint(), d.fingerprint());
  EXPECT_NE(TextDataset::builtin(kCorpusSeed, 3000, 0.25, DataTokenizer::load(dir + "nfkc_sp"))
                .fingerprint(),
            d.fingerprint());
}

TEST(TextDataset, ReadsAFileAsBytes) {
  const std::string path = ::testing::TempDir() + "reprise_data_test.txt";
  const std::string bytes = std::string("hello\0world\n\xff", 13);
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  const TextDataset d = TextDataset::from_file(path, 0.0);
  EXPECT_EQ(d.text(), bytes);
  EXPECT_EQ(d.name(), path);
  EXPECT_EQ(d.path(), path);
  EXPECT_EQ(TextDataset::builtin(kCorpusSeed, 100).path(), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace reprise::nn
