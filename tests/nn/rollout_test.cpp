// Rollouts (nn/rollout.h): a sequence's tokens and log-probs are bit for
// bit its own, whatever its batch-mates, the thread count and the CPU
// capability, and the training forward gives the same log-probs bit for
// bit, with grad, under each checkpoint policy, for every family's tiny
// model (dense, sliding-window, MoE, MLA).
#include "nn/rollout.h"

#include <gtest/gtest.h>

#include <cstring>

#include "autograd/backward.h"
#include "engine/threads.h"
#include "nn/autocast.h"
#include "nn/checkpointing.h"
#include "nn/hf.h"
#include "nn/moe.h"
#include "nn/routing.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "tests/support/bits.h"
#include "tests/support/capabilities.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"

namespace reprise::nn {
namespace {

using testing::expect_error;
using testing::f32_bits;
using testing::fixture_path;

const char* const kModels[] = {"llama_tiny",
                               "mixtral_tiny",
                               "families/llama3",
                               "families/mistral",
                               "families/qwen2",
                               "families/qwen3",
                               "families/qwen2_moe",
                               "families/qwen3_moe",
                               "families/olmoe",
                               "families/deepseek_v3",
                               "families/smollm3",
                               "families/olmo2",
                               "families/olmo3",
                               "families/gemma3_text",
                               "families/glm4_moe",
                               "families/gpt_oss",
                               "families/qwen3_next",
                               "families/qwen3_5_text",
                               "families/qwen3_5_moe_text"};

// Prompts of lengths 5, 9, 5 and 5 (the last repeats the first): two
// lengths, so two batches, one of them of three.
std::vector<std::vector<int64_t>> prompts_for(int64_t vocab) {
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t length : {5, 9, 5}) {
    std::vector<int64_t> p;
    for (int64_t t = 0; t < length; ++t) p.push_back((prompts.size() * 31 + t * 7 + 3) % vocab);
    prompts.push_back(p);
  }
  prompts.push_back(prompts[0]);
  return prompts;
}

// Sampling at temperature 1 over every id, with stop tokens that end some
// sequences early (a batch then shrinks mid-way).
RolloutOptions sampling_options(int64_t vocab) {
  RolloutOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 1.0;
  o.seed = 2026;
  for (int64_t id = 1; id < vocab; id += vocab / 6) o.stop_tokens.push_back(id);
  return o;
}

void expect_same(const Rollout& a, const Rollout& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(f32_bits(a.logprobs), f32_bits(b.logprobs)) << what;
  EXPECT_EQ(a.stop, b.stop) << what;
}

TEST(Rollout, ASequenceIsItsOwnWhateverItsBatch) {
  for (const char* folder : kModels) {
    SCOPED_TRACE(folder);
    auto model = load_model(fixture_path(folder));
    const auto prompts = prompts_for(model->config().vocab_size);
    const RolloutOptions o = sampling_options(model->config().vocab_size);
    const std::vector<Rollout> together = generate(*model, prompts, o);
    ASSERT_EQ(together.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      RolloutOptions alone = o;
      alone.sequence_ids = {uint64_t(i)};
      expect_same(generate(*model, {prompts[i]}, alone)[0], together[i],
                  "sequence " + std::to_string(i) + " alone");
    }
    // In reverse order, each keeping its id.
    RolloutOptions reversed = o;
    const std::vector<std::vector<int64_t>> backwards(prompts.rbegin(), prompts.rend());
    for (size_t i = 0; i < prompts.size(); ++i)
      reversed.sequence_ids.push_back(prompts.size() - 1 - i);
    const std::vector<Rollout> back = generate(*model, backwards, reversed);
    for (size_t i = 0; i < prompts.size(); ++i)
      expect_same(back[prompts.size() - 1 - i], together[i], "reversed");
    // The same prompt under another id samples its own tokens.
    EXPECT_NE(together[0].tokens, together[3].tokens);
  }
}

TEST(Rollout, SomeSequencesStopEarlyAndEachStopsAtItsStopToken) {
  auto model = load_model(fixture_path("llama_tiny"));
  const RolloutOptions o = sampling_options(model->config().vocab_size);
  std::vector<std::vector<int64_t>> prompts = prompts_for(model->config().vocab_size);
  for (int i = 0; i < 12; ++i) prompts.push_back(prompts[size_t(i % 3)]);
  int64_t early = 0;
  for (const Rollout& r : generate(*model, prompts, o)) {
    ASSERT_FALSE(r.tokens.empty());
    ASSERT_EQ(r.logprobs.size(), r.tokens.size());
    const bool stopped = std::find(o.stop_tokens.begin(), o.stop_tokens.end(), r.tokens.back()) !=
                         o.stop_tokens.end();
    EXPECT_EQ(r.stop, stopped ? StopReason::eos : StopReason::max_new_tokens);
    if (stopped) early += int64_t(r.tokens.size()) < o.max_new_tokens;
    for (size_t t = 0; t + 1 < r.tokens.size(); ++t)
      EXPECT_EQ(std::count(o.stop_tokens.begin(), o.stop_tokens.end(), r.tokens[t]), 0);
    for (float lp : r.logprobs) EXPECT_LE(lp, 0.0f);
  }
  EXPECT_GT(early, 0) << "no sequence stopped early: the test exercises nothing";
}

TEST(Rollout, SameBitsAtEveryThreadCountAndCpuCapability) {
  for (const char* folder : {"llama_tiny", "mixtral_tiny", "families/deepseek_v3"}) {
    SCOPED_TRACE(folder);
    auto model = load_model(fixture_path(folder));
    const auto prompts = prompts_for(model->config().vocab_size);
    const RolloutOptions o = sampling_options(model->config().vocab_size);
    const int threads = threads::num_threads();
    threads::set_num_threads(1);
    const std::vector<Rollout> one = generate(*model, prompts, o);
    threads::set_num_threads(threads);
    testing::for_each_capability([&](CpuCapability cap) {
      const std::vector<Rollout> got = generate(*model, prompts, o);
      for (size_t i = 0; i < prompts.size(); ++i)
        expect_same(got[i], one[i], std::string("at ") + to_string(cap));
    });
  }
}

// prompt + tokens of each rollout, right-padded, and its length.
Tensor training_batch(const std::vector<std::vector<int64_t>>& prompts,
                      const std::vector<Rollout>& rollouts, int64_t& longest) {
  const Tensor ids = rollout_ids(prompts, rollouts);
  longest = ids.size(1);
  return ids;
}

// Sequence i's completion log-probs out of next_token_logprobs's (B, T - 1):
// positions P - 1 .. P + n - 2 of its row.
std::vector<float> completion_logprobs(const Tensor& logprobs, size_t i,
                                       const std::vector<int64_t>& prompt, const Rollout& r) {
  const int64_t first = int64_t(prompt.size()) - 1;
  return logprobs.detach()
      .select(0, int64_t(i))
      .slice(0, first, first + int64_t(r.tokens.size()))
      .to_vector<float>();
}

TEST(Rollout, TheTrainingForwardGivesTheSamplersLogprobsBitForBit) {
  for (const char* folder : kModels) {
    SCOPED_TRACE(folder);
    auto model = load_model(fixture_path(folder));
    const auto prompts = prompts_for(model->config().vocab_size);
    const std::vector<Rollout> rollouts =
        generate(*model, prompts, sampling_options(model->config().vocab_size));
    int64_t longest = 0;
    const Tensor ids = training_batch(prompts, rollouts, longest);
    for (const char* policy : {"none", "full", "op-sac"}) {
      SCOPED_TRACE(policy);
      LayerCheckpointing layers(CheckpointConfig::parse(policy), model->dropout_generator(),
                                moe_scopes_of(model->config()));
      const Tensor logprobs = next_token_logprobs(model->forward(ids, layers.runner()).logits, ids);
      ASSERT_TRUE(logprobs.requires_grad());
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(f32_bits(completion_logprobs(logprobs, i, prompts[i], rollouts[i])),
                  f32_bits(rollouts[i].logprobs))
            << "sequence " << i;
      }
      // The gradient reaches the parameters through the recompute.
      const Tensor loss = ops::sum(logprobs);
      EXPECT_TRUE(autograd::grad({loss}, {model->model.embed_tokens.weight()})[0].defined());
    }
  }
}

TEST(Rollout, TheRoutingRecordIsTheTrainingForwardsRouting) {
  for (const char* folder : kModels) {
    SCOPED_TRACE(folder);
    auto model = load_model(fixture_path(folder));
    const auto prompts = prompts_for(model->config().vocab_size);
    RolloutOptions o = sampling_options(model->config().vocab_size);
    const std::vector<Rollout> plain = generate(*model, prompts, o);
    o.record_routing = true;
    const std::vector<Rollout> recorded = generate(*model, prompts, o);
    int64_t longest = 0;
    const Tensor ids = training_batch(prompts, recorded, longest);
    RoutingCapture capture;
    model->forward(ids);
    const std::vector<RoutingRecord> trained = capture.records(int64_t(prompts.size()), longest);
    const size_t moe_layers = moe_scopes_of(model->config()).empty() ? 0 : trained[0].layers.size();
    for (size_t i = 0; i < prompts.size(); ++i) {
      expect_same(recorded[i], plain[i], "recording changes nothing");
      const RoutingRecord& r = recorded[i].routing;
      const int64_t positions = int64_t(prompts[i].size() + recorded[i].tokens.size());
      ASSERT_EQ(r.positions, positions);
      EXPECT_EQ(r.layers.size(), moe_layers);
      const RoutingRecord t = trained[i].first_positions(positions);
      EXPECT_EQ(routing_flips(r, t), 0);
      EXPECT_EQ(r.experts, t.experts) << "sequence " << i;
      EXPECT_EQ(r.margin, t.margin) << "sequence " << i;
    }
    if (moe_layers > 0) {
      // A different choice counts as a flip, an order swap does not.
      RoutingRecord flipped = recorded[0].routing;
      std::swap(flipped.experts[0], flipped.experts[1]);
      EXPECT_EQ(routing_flips(flipped, recorded[0].routing), 0);
      // Position 0 of the first MoE layer takes an expert it did not choose.
      for (uint16_t e = 0; e < flipped.num_experts; ++e) {
        if (std::find(flipped.experts.begin(), flipped.experts.begin() + flipped.k, e) ==
            flipped.experts.begin() + flipped.k) {
          flipped.experts[0] = e;
          break;
        }
      }
      EXPECT_EQ(routing_flips(flipped, recorded[0].routing), 1);
      expect_error([&] { routing_flips(recorded[0].routing, recorded[1].routing); },
                   {"routing_flips", "positions does not fit"});
    }
  }
}

// Under bf16 autocast (projections, and attention too), the sampler and the
// training forward still agree bit for bit when both run the same autocast.
TEST(Rollout, TheTrainingForwardAgreesUnderBf16Autocast) {
  for (const char* folder : {"llama_tiny", "mixtral_tiny", "families/deepseek_v3"}) {
    for (DType attention : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(folder) + ", attention " + dtype_name(attention));
      auto model = load_model(fixture_path(folder));
      const auto prompts = prompts_for(model->config().vocab_size);
      RolloutOptions o = sampling_options(model->config().vocab_size);
      o.record_routing = true;
      const std::vector<float> f32 = generate(*model, prompts, o)[0].logprobs;
      Autocast bf16(DType::bf16, attention);
      const std::vector<Rollout> rollouts = generate(*model, prompts, o);
      EXPECT_NE(f32_bits(rollouts[0].logprobs), f32_bits(f32)) << "autocast changed nothing";
      int64_t longest = 0;
      const Tensor ids = training_batch(prompts, rollouts, longest);
      RoutingCapture capture;
      const Tensor logprobs = next_token_logprobs(model->forward(ids).logits, ids);
      const std::vector<RoutingRecord> trained = capture.records(int64_t(prompts.size()), longest);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(f32_bits(completion_logprobs(logprobs, i, prompts[i], rollouts[i])),
                  f32_bits(rollouts[i].logprobs))
            << "sequence " << i;
        EXPECT_EQ(routing_flips(rollouts[i].routing,
                                trained[i].first_positions(rollouts[i].routing.positions)),
                  0);
      }
    }
  }
}

// The routers' weights, by name.
std::vector<std::pair<std::string, Tensor>> routers(const LlamaForCausalLM& model) {
  std::string suffix = ".";
  suffix += moe_scopes_of(model.config()).router;
  suffix += ".weight";
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : model.named_parameters()) {
    if (name.ends_with(suffix)) out.emplace_back(name, t);
  }
  return out;
}

const char* const kMoeModels[] = {
    "mixtral_tiny",     "families/qwen2_moe",   "families/qwen3_moe",
    "families/olmoe",   "families/deepseek_v3", "families/glm4_moe",
    "families/gpt_oss", "families/qwen3_next",  "families/qwen3_5_moe_text"};

// A model's rollouts with their routing records, and the training batch of
// prompt + tokens (padded to `longest`).
struct Recorded {
  explicit Recorded(const char* folder) : model(load_model(fixture_path(folder))) {
    prompts = prompts_for(model->config().vocab_size);
    RolloutOptions o = sampling_options(model->config().vocab_size);
    o.record_routing = true;
    rollouts = generate(*model, prompts, o);
    ids = training_batch(prompts, rollouts, longest);
    for (const Rollout& r : rollouts) records.push_back(r.routing);
  }
  std::unique_ptr<LlamaForCausalLM> model;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<Rollout> rollouts;
  int64_t longest = 0;
  Tensor ids;
  std::vector<RoutingRecord> records;
};

TEST(RoutingReplay, AnAgreeingRecordChangesNothing) {
  for (const char* folder : kMoeModels) {
    SCOPED_TRACE(folder);
    Recorded r(folder);
    auto& [model, prompts, rollouts, longest, ids, records] = r;
    const Tensor plain = next_token_logprobs(model->forward(ids).logits, ids);
    RoutingReplay replay(records, longest);
    const Tensor replayed = next_token_logprobs(model->forward(ids).logits, ids);
    EXPECT_EQ(f32_bits(plain.to_vector<float>()), f32_bits(replayed.to_vector<float>()));
    EXPECT_EQ(replay.overridden(), 0);
  }
}

// One position's experts changed in one layer of sequence 0: the forward
// routes that position by the record, the other sequences do not notice,
// the router gets its gradient, and a fully checkpointed layer's replay
// gives the same gradients bit for bit.
TEST(RoutingReplay, RoutesByTheRecordWithGradientsToTheRouter) {
  for (const char* folder : kMoeModels) {
    SCOPED_TRACE(folder);
    Recorded r(folder);
    auto& [model, prompts, rollouts, longest, ids, records] = r;
    RoutingRecord& changed = records[0];
    const int64_t t = 2, L = int64_t(changed.layers.size()), k = changed.k;
    const auto row = changed.experts.begin() + (t * L + L - 1) * k;  // the last MoE layer
    std::vector<uint16_t> others;
    for (uint16_t e = 0; e < changed.num_experts; ++e) {
      if (std::find(row, row + k, e) == row + k) others.push_back(e);
    }
    ASSERT_GE(int64_t(others.size()), 1);
    row[0] = others[0];

    std::vector<std::vector<Tensor>> grads;
    for (const char* policy : {"none", "full"}) {
      SCOPED_TRACE(policy);
      LayerCheckpointing layers(CheckpointConfig::parse(policy), model->dropout_generator(),
                                moe_scopes_of(model->config()));
      RoutingReplay replay(records, longest);
      RoutingCapture capture;
      const Tensor logprobs = next_token_logprobs(model->forward(ids, layers.runner()).logits, ids);
      EXPECT_EQ(replay.overridden(), 1);
      const std::vector<RoutingRecord> routed = capture.records(int64_t(prompts.size()), longest);
      EXPECT_EQ(routed[0].first_positions(changed.positions).experts, changed.experts);
      for (size_t i = 1; i < prompts.size(); ++i) {
        EXPECT_EQ(f32_bits(completion_logprobs(logprobs, i, prompts[i], rollouts[i])),
                  f32_bits(rollouts[i].logprobs))
            << "sequence " << i;
      }
      std::vector<Tensor> wrt;
      for (const auto& [name, w] : routers(*model)) wrt.push_back(w);
      grads.push_back(autograd::grad({ops::sum(logprobs)}, wrt));
      for (const Tensor& g : grads.back()) {
        ASSERT_TRUE(g.defined());
        EXPECT_GT(ops::sum(ops::mul(g, g)).item<float>(), 0.0f);
      }
    }
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_EQ(f32_bits(grads[0][i].to_vector<float>()), f32_bits(grads[1][i].to_vector<float>()));
  }
}

TEST(RoutingReplay, ARecordThatDoesNotFitIsAnError) {
  auto mixtral = load_model(fixture_path("mixtral_tiny"));
  auto olmoe = load_model(fixture_path("families/olmoe"));
  RolloutOptions o;
  o.max_new_tokens = 3;
  o.record_routing = true;
  const RoutingRecord record = generate(*mixtral, {{1, 2, 3}}, o)[0].routing;  // 6 positions
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {1, 6});
  expect_error([&] { RoutingReplay replay({record}, 5); },
               {"RoutingReplay: record 0 has 6 positions", "forward's 5"});
  expect_error(
      [&] {
        RoutingReplay replay({record}, 6);
        olmoe->forward(ids);
      },
      {"RoutingReplay", "MoE layer 'model.layers.0.mlp'", "block_sparse_moe"});
  expect_error(
      [&] {
        RoutingReplay replay({record}, 3);
        mixtral->forward(ids);
      },
      {"RoutingReplay: record 0 has 6 positions"});
  expect_error(
      [&] {
        RoutingReplay replay({record, record}, 6);
        mixtral->forward(ids);
      },
      {"routes 6 tokens", "forward of 2 x 6"});
  RoutingRecord bad = record;
  bad.experts[1] = 9;
  expect_error(
      [&] {
        RoutingReplay replay({bad}, 6);
        mixtral->forward(ids);
      },
      {"record 0 gives position 0", "expert 9", "has 4"});
  bad.experts[1] = bad.experts[0];
  expect_error(
      [&] {
        RoutingReplay replay({bad}, 6);
        mixtral->forward(ids);
      },
      {"twice"});
  bad = record;
  bad.k = 3;
  expect_error([&] { RoutingReplay replay({record, bad}, 6); }, {"record 1", "does not fit"});
}

TEST(Rollout, BadInputIsAnErrorNamingTheSequence) {
  auto model = load_model(fixture_path("llama_tiny"));  // vocabulary 256, 64 positions
  RolloutOptions o;
  o.max_new_tokens = 8;
  expect_error([&] { generate(*model, {{1, 2}, {}}, o); }, {"generate: sequence 1", "empty"});
  expect_error(
      [&] {
        generate(*model, {{1, 2}, {3, 256}}, o);
      },
      {"generate: sequence 1", "prompt token 1", "id 256", "[0, 256)"});
  expect_error([&] { generate(*model, {std::vector<int64_t>(60, 1)}, o); },
               {"generate: sequence 0", "60 tokens", "max_new_tokens = 8", "68", "64"});
  RolloutOptions bad = o;
  bad.stop_tokens = {300};
  expect_error([&] { generate(*model, {{1}}, bad); }, {"stop token 300", "[0, 256)"});
  bad = o;
  bad.sequence_ids = {1, 2};
  expect_error([&] { generate(*model, {{1}}, bad); }, {"2 sequence_ids for 1 prompts"});
  bad = o;
  bad.max_new_tokens = 0;
  expect_error([&] { generate(*model, {{1}}, bad); }, {"max_new_tokens must be >= 1"});
  expect_error(
      [] {
        next_token_logprobs(Tensor::zeros({2, 3, 5}), Tensor::zeros({2, 4}, DType::i64));
      },
      {"next_token_logprobs", "f32[2, 3, 5]", "i64[2, 4]"});
}

}  // namespace
}  // namespace reprise::nn
