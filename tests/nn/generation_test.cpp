// Generation through a KV cache (nn/generation.h, nn/kv_cache.h,
// LlamaForCausalLM::forward_cached) and token choice (nn/sampling.h):
// greedy tokens against transformers' generate on the tiny golden Llama
// (grouped-query attention) and Mixtral (tests/fixtures/golden_generate.py),
// cached logits against the full forward's bit for bit, sampling filters
// and seeds, stopping, and bad prompts.
#include "nn/generation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "nn/hf.h"
#include "nn/kv_cache.h"
#include "nn/sampling.h"
#include "tests/support/bits.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"

namespace reprise::nn {
namespace {

using testing::expect_error;
using testing::f32_bits;
using testing::fixture_path;

const testing::GoldenModel kGenerateGolden{"generate_golden.safetensors", "llama_tiny"};

std::vector<int64_t> ids_of(const Tensor& t) { return t.to_vector<int64_t>(); }

// Greedy decoding is argmax after argmax, so it repeats transformers' tokens
// only where f32 noise cannot flip one: the fixture's prompts have top-2
// logit margins of at least 1e-3 at every step (and router margins of at
// least 1e-4), against differences of about 1e-6 between the two.
TEST(GenerationGolden, GreedyTokensEqualTransformers) {
  for (const char* name : {"llama", "mixtral"}) {
    auto model = load_model(fixture_path(std::string(name) + "_tiny"));
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(std::string(name) + " prompt " + std::to_string(i));
      const std::string key = std::string(name) + "." + std::to_string(i);
      const std::vector<int64_t> prompt =
          ids_of(kGenerateGolden.get(std::string(name) + ".prompt." + std::to_string(i)));
      const std::vector<int64_t> want =
          ids_of(kGenerateGolden.get(std::string(name) + ".greedy." + std::to_string(i)));
      const GenerationResult r = generate(*model, prompt, {.max_new_tokens = int64_t(want.size())});
      EXPECT_EQ(r.tokens, want);
      EXPECT_EQ(r.stop, StopReason::max_new_tokens);
      EXPECT_EQ(r.decode_steps, int64_t(want.size()) - 1);
    }
  }
}

// The logits of a sequence fed through the cache in pieces (a prompt, a
// chunk of several tokens after it, then one token at a time) are, row for
// row, the bits of one forward over the whole sequence: every product is
// one FMA chain per element and every attention row is computed on its
// own, so no row depends on how many others share its call.
TEST(KvCache, LogitsEqualTheFullForwardBitForBit) {
  for (const char* folder : {"llama_tiny", "mixtral_tiny"}) {
    SCOPED_TRACE(folder);
    auto model = load_model(fixture_path(folder));
    const int64_t B = 2, L = 50, V = model->config().vocab_size;
    std::vector<int64_t> seq(size_t(B * L));
    for (size_t i = 0; i < seq.size(); ++i) seq[i] = int64_t(i * 7919 % size_t(V));
    const Tensor ids = Tensor::from_vector(seq, {B, L});
    Tensor full;
    {
      NoGradGuard no_grad;
      full = model->forward(ids).logits;  // (B, L, V)
    }
    KvCache cache(model->config(), B, L);
    int64_t pos = 0;
    for (int64_t len : {13, 9, 1, 1, 26}) {
      const Tensor part = model->forward_cached(ids.slice(1, pos, pos + len).contiguous(), cache);
      EXPECT_EQ(f32_bits(part), f32_bits(full.slice(1, pos, pos + len))) << "positions " << pos;
      pos += len;
    }
    EXPECT_EQ(cache.length(), L);
    EXPECT_EQ(pos, L);
  }
}

// cache.batch() sequences of L ids fed through `cache` in `pieces`, then
// one id at a time up to L: each piece's logits are the bits of one forward
// over the whole sequences. after_piece runs after each piece.
void expect_pieces_give_the_full_forwards_bits(const LlamaForCausalLM& model, KvCache& cache,
                                               int64_t L, std::vector<int64_t> pieces,
                                               const std::function<void()>& after_piece = {}) {
  const int64_t B = cache.batch(), V = model.config().vocab_size;
  std::vector<int64_t> seq(size_t(B * L));
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = int64_t(i * 7919 % size_t(V));
  const Tensor ids = Tensor::from_vector(seq, {B, L});
  Tensor full;
  {
    NoGradGuard no_grad;
    full = model.forward(ids).logits;  // (B, L, V)
  }
  int64_t fed = 0;
  for (int64_t len : pieces) fed += len;
  pieces.resize(pieces.size() + size_t(L - fed), 1);
  int64_t pos = 0;
  for (int64_t len : pieces) {
    const Tensor part = model.forward_cached(ids.slice(1, pos, pos + len).contiguous(), cache);
    ASSERT_EQ(f32_bits(part), f32_bits(full.slice(1, pos, pos + len))) << "positions " << pos;
    if (after_piece) after_piece();
    pos += len;
  }
  EXPECT_EQ(cache.length(), L);
}

// A layer with a sliding window keeps only about the window in the cache
// (GPT-OSS's layout: layer 0 slides over 8 positions, layer 1 attends to
// all), growing for a long forward and shrinking back, and the logits are
// still the full forward's bit for bit: the cache drops whole key blocks.
TEST(KvCache, ASlidingLayerKeepsItsWindowAndTheFullForwardsBits) {
  LlamaConfig c = read_llama_config(fixture_path("families/gpt_oss"));
  c.max_position_embeddings = 512;
  c.sliding_window = 8;
  ASSERT_EQ(c.attention_window(0), 8);
  ASSERT_EQ(c.attention_window(1), 0);
  rng::Generator init(7);
  const LlamaForCausalLM model(c, init);
  const int64_t L = 300;
  KvCache cache(c, 2, L);
  EXPECT_EQ(cache.rows(0), 128);  // the window, rounded up to a key block, and a block
  EXPECT_EQ(cache.rows(1), L);
  int64_t widest = 0;
  expect_pieces_give_the_full_forwards_bits(model, cache, L, {13, 9, 1, 1, 150},
                                            [&] { widest = std::max(widest, cache.rows(0)); });
  EXPECT_EQ(widest, 24 + 150);  // the long forward's keys, from position 0
  EXPECT_EQ(cache.rows(0), 128);
}

// A gated DeltaNet layer decodes from its two states (the convolution's
// last inputs, the delta rule's matrix), past several of the delta rule's
// 64-position blocks: the logits are the full forward's bit for bit, and
// its cache holds no positions.
TEST(KvCache, DeltaNetLayersDecodeAsTheFullForward) {
  LlamaConfig c = read_llama_config(fixture_path("families/qwen3_next"));
  c.max_position_embeddings = 256;
  rng::Generator init(11);
  const LlamaForCausalLM model(c, init);
  const int64_t L = 200;
  KvCache cache(c, 2, L);
  EXPECT_EQ(cache.rows(0), 0);  // linear: states, not positions
  EXPECT_EQ(cache.rows(2), L);  // full attention
  expect_pieces_give_the_full_forwards_bits(model, cache, L, {13, 9, 1, 1, 100});
}

TEST(KvCache, LastOnlyGivesTheLastRow) {
  auto model = load_model(fixture_path("llama_tiny"));
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{5, 6, 7, 8}, {1, 4});
  KvCache a(model->config(), 1, 8), b(model->config(), 1, 8);
  const Tensor all = model->forward_cached(ids, a);
  const Tensor last = model->forward_cached(ids, b, /*last_only=*/true);
  EXPECT_EQ(last.shape(), (Shape{1, 1, 256}));
  EXPECT_EQ(f32_bits(last), f32_bits(all.slice(1, 3, 4)));
}

// Generation never routes by capacity: a model trained with a capacity
// limit gives, through the cache, the logits of a forward without one.
TEST(KvCache, MoeRoutesWithoutTheCapacityLimit) {
  LlamaConfig c = read_llama_config(fixture_path("mixtral_tiny"));
  c.moe->capacity_factor = 0.5;
  LlamaForCausalLM limited(c);
  load_weights(limited, fixture_path("mixtral_tiny"));
  auto unlimited = load_model(fixture_path("mixtral_tiny"));
  std::vector<int64_t> seq(20);
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = int64_t(i * 13 % 64);
  const Tensor ids = Tensor::from_vector(seq, {1, 20});
  NoGradGuard no_grad;
  const Tensor want = unlimited->forward(ids).logits;
  const CausalLMOutput capped = limited.forward(ids);
  ASSERT_GT(capped.moe_stats()[0].tokens_dropped, 0);  // the limit does drop tokens here
  KvCache cache(c, 1, 20);
  EXPECT_EQ(f32_bits(limited.forward_cached(ids, cache)), f32_bits(want));
}

TEST(KvCache, RejectsWhatDoesNotFit) {
  auto model = load_model(fixture_path("llama_tiny"));
  const LlamaConfig& c = model->config();
  KvCache cache(c, 1, 4);
  const Tensor three = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {1, 3});
  model->forward_cached(three, cache);
  expect_error([&] { model->forward_cached(three, cache); },
               {"forward_cached", "3 tokens after the 3", "capacity of 4"});
  expect_error(
      [&] {
        model->forward_cached(Tensor::zeros({2, 1}, DType::i64), cache);
      },
      {"B = 1", "i64[2, 1]"});
  expect_error([&] { KvCache(c, 1, 65); }, {"capacity", "max_position_embeddings = 64", "65"});
  expect_error([&] { KvCache(c, 0, 4); }, {"batch", "0"});
}

TEST(Generation, BadPromptsAreErrors) {
  auto model = load_model(fixture_path("llama_tiny"));  // vocabulary 256, 64 positions
  expect_error(
      [&] {
        generate(*model, {1, 256}, {});
      },
      {"prompt token 1", "id 256", "vocabulary [0, 256)"});
  expect_error([&] { generate(*model, {-3}, {}); }, {"prompt token 0", "id -3"});
  expect_error([&] { generate(*model, {}, {}); }, {"prompt is empty"});
  expect_error([&] { generate(*model, std::vector<int64_t>(65, 1), {}); },
               {"65 tokens", "max_position_embeddings = 64"});
  expect_error([&] { generate(*model, {1}, {.sampling = {.temperature = -1}}); },
               {"temperature", "-1"});
  expect_error([&] { generate(*model, {1}, {.sampling = {.top_p = 0}}); }, {"top_p"});
}

TEST(Generation, StopsAtEosAndWhenTheContextIsFull) {
  auto model = load_model(fixture_path("llama_tiny"));
  const std::vector<int64_t> prompt = ids_of(kGenerateGolden.get("llama.prompt.1"));
  const std::vector<int64_t> greedy = ids_of(kGenerateGolden.get("llama.greedy.1"));
  // EOS: the fourth greedy token; generation stops there and keeps it.
  const GenerationResult eos = generate(*model, prompt, {.max_new_tokens = 40, .eos = greedy[3]});
  EXPECT_EQ(eos.stop, StopReason::eos);
  EXPECT_EQ(eos.tokens, std::vector<int64_t>(greedy.begin(), greedy.begin() + 4));
  // 7 prompt tokens and 64 positions: one token from the prompt's forward
  // and one from each of the 57 fed until the cache holds all 64.
  const GenerationResult full = generate(*model, prompt, {.max_new_tokens = 100});
  EXPECT_EQ(full.stop, StopReason::context);
  EXPECT_EQ(full.tokens.size(), 58u);
  EXPECT_EQ(std::vector<int64_t>(full.tokens.begin(), full.tokens.begin() + 40), greedy);
  EXPECT_TRUE(generate(*model, prompt, {.max_new_tokens = 0}).tokens.empty());
}

TEST(Generation, StreamsEachTokenBeforeTheNextForward) {
  auto model = load_model(fixture_path("mixtral_tiny"));
  std::vector<int64_t> streamed;
  const GenerationResult r =
      generate(*model, {3, 1, 4}, {.max_new_tokens = 12, .sampling = {.temperature = 1.0}},
               [&](int64_t id) { streamed.push_back(id); });
  EXPECT_EQ(streamed, r.tokens);
  EXPECT_EQ(r.prompt_tokens, 3);
}

TEST(Generation, SameSeedSameTokensOtherSeedOtherTokens) {
  auto model = load_model(fixture_path("llama_tiny"));
  const GenerationOptions opt{.max_new_tokens = 30,
                              .sampling = {.temperature = 1.5, .top_k = 50, .top_p = 0.95},
                              .seed = 7};
  const std::vector<int64_t> a = generate(*model, {10, 20, 30}, opt).tokens;
  EXPECT_EQ(generate(*model, {10, 20, 30}, opt).tokens, a);
  GenerationOptions other = opt;
  other.seed = 8;
  EXPECT_NE(generate(*model, {10, 20, 30}, other).tokens, a);
}

TEST(Generation, TopKOneIsGreedy) {
  auto model = load_model(fixture_path("mixtral_tiny"));
  const std::vector<int64_t> prompt = ids_of(kGenerateGolden.get("mixtral.prompt.2"));
  const GenerationResult r = generate(
      *model, prompt, {.max_new_tokens = 40, .sampling = {.temperature = 2.0, .top_k = 1}});
  EXPECT_EQ(r.tokens, ids_of(kGenerateGolden.get("mixtral.greedy.2")));
}

TEST(Generation, ChoosesOnlyBelowTheLimit) {
  auto model = load_model(fixture_path("llama_tiny"));
  const GenerationResult r =
      generate(*model, {1, 2, 3},
               {.max_new_tokens = 40, .sampling = {.temperature = 3.0}, .choose_below = 100});
  for (int64_t id : r.tokens) EXPECT_LT(id, 100);
}

// ---- TokenSampler ------------------------------------------------------------

Tensor logits_of(const std::vector<double>& v) {
  return Tensor::from_vector(v, {int64_t(v.size())});
}

TEST(TokenSampler, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  TokenSampler s({}, 1);
  EXPECT_EQ(s.next(logits_of({0.5, 2.0, -1.0, 2.0})), 1);
  EXPECT_EQ(s.next(logits_of({-INFINITY, -5.0})), 1);
}

// Frequencies over 20000 draws from a fixed seed against the softmax: each
// within 5 standard deviations (a deterministic test: same words every run).
TEST(TokenSampler, SamplesTheSoftmaxOfTheScaledLogits) {
  const std::vector<double> z{1.0, 0.0, 2.0, -1.0, 0.5};
  for (double t : {1.0, 0.5}) {
    TokenSampler s({.temperature = t}, 42);
    std::vector<double> p(z.size());
    double total = 0;
    for (size_t i = 0; i < z.size(); ++i) total += p[i] = std::exp(z[i] / t);
    std::vector<int> count(z.size());
    const int n = 20000;
    for (int i = 0; i < n; ++i) ++count[size_t(s.next(logits_of(z)))];
    for (size_t i = 0; i < z.size(); ++i) {
      const double q = p[i] / total, sd = std::sqrt(q * (1 - q) / n);
      EXPECT_NEAR(double(count[i]) / n, q, 5 * sd + 1e-9) << "t " << t << " id " << i;
    }
  }
}

TEST(TokenSampler, TopKAndTopPKeepTheirSets) {
  // Probabilities (softmax of log p): 0.4, 0.3, 0.2, 0.1 at ids 3, 0, 2, 1.
  const std::vector<double> z{std::log(0.3), std::log(0.1), std::log(0.2), std::log(0.4)};
  auto drawn = [&](const SamplingOptions& o) {
    TokenSampler s(o, 3);
    std::set<int64_t> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(s.next(logits_of(z)));
    return seen;
  };
  EXPECT_EQ(drawn({.temperature = 1, .top_k = 2}), (std::set<int64_t>{3, 0}));
  // top-p 0.65: 0.4 is below it, 0.4 + 0.3 reaches it.
  EXPECT_EQ(drawn({.temperature = 1, .top_p = 0.65}), (std::set<int64_t>{3, 0}));
  EXPECT_EQ(drawn({.temperature = 1, .top_p = 0.75}), (std::set<int64_t>{3, 0, 2}));
  EXPECT_EQ(drawn({.temperature = 1, .top_p = 0.1}), (std::set<int64_t>{3}));
  // top-k first, then top-p within the k: (0.4, 0.3, 0.2) renormalized.
  EXPECT_EQ(drawn({.temperature = 1, .top_k = 3, .top_p = 0.5}), (std::set<int64_t>{3, 0}));
  EXPECT_EQ(drawn({.temperature = 1}), (std::set<int64_t>{0, 1, 2, 3}));
}

TEST(TokenSampler, CallNReadsItsOwnWords) {
  // A greedy call takes its words too, so a sampled call's choice depends
  // only on how many calls came before it.
  const Tensor z = logits_of({0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  TokenSampler a({.temperature = 1}, 9), b({.temperature = 1}, 9);
  a.next(z);
  TokenSampler greedy({}, 9);
  greedy.next(z);
  EXPECT_EQ(a.generator().offset("sample"), greedy.generator().offset("sample"));
  b.next(z);
  EXPECT_EQ(a.next(z), b.next(z));
}

TEST(TokenSampler, RejectsNanAndBadShapes) {
  TokenSampler s({.temperature = 1}, 1);
  expect_error([&] { s.next(logits_of({0.0, NAN})); }, {"logit 1 of 2", "NaN"});
  expect_error([&] { s.next(Tensor::zeros({2, 3})); }, {"(V)", "f32[2, 3]"});
  expect_error([&] { s.next(logits_of({-INFINITY, -INFINITY})); }, {"-inf"});
  expect_error([] { TokenSampler({.top_k = -1}, 1); }, {"top_k", "-1"});
}

}  // namespace
}  // namespace reprise::nn
