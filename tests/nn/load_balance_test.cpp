// DeepSeek-V3's auxiliary-loss-free load balancing (MoeConfig::
// load_balance_coeff): the bias update by hand, the config field's checks
// and round trips, and the Trainer's update after each applied step, on a
// tiny DeepSeek-V3 (tests/fixtures/families/deepseek_v3's shape with the
// 256 byte values as vocabulary: MLA, yarn rope, one dense layer then two
// MoE layers of 8 sigmoid-scored experts, top-3 in 2 of 4 groups, one
// shared expert).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/json.h"
#include "nn/hf_config.h"
#include "nn/train_state.h"
#include "nn/trainer.h"
#include "tests/support/bits.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_train.h"

namespace reprise::nn {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::f32_bits;

// The tiny DeepSeek-V3 run: batch 4 x 32 tokens, 128 tokens and 384
// assignments per MoE layer and step.
TrainConfig deepseek_run(double coeff, int64_t steps) {
  TrainConfig c = testing::tiny_train_config(/*hidden=*/32, /*intermediate=*/64, steps,
                                             /*batch=*/4, /*seq=*/32);
  c.model = read_llama_config(testing::fixture_path("families/deepseek_v3"));
  c.model.vocab_size = kByteVocabSize;
  c.model.moe->load_balance_coeff = coeff;
  return c;
}

std::shared_ptr<const TextDataset> corpus() { return testing::builtin_corpus(20000); }

// Each MoE layer's e_score_correction_bias (E), in layer order.
std::vector<std::vector<float>> biases(const Trainer& t) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < t.model().model.layers.size(); ++i) {
    if (const SparseMoeBlock* moe = t.model().model.layers[i].moe.get())
      out.push_back(moe->gate.score_bias().to_vector<float>());
  }
  return out;
}

// The update written out again, another way than balance_score_bias: the
// mean load in f64, each delta +-coeff in f32, their mean summed in f64
// (exact: E multiples of one f32) and rounded to f32.
std::vector<float> expected_bias(const std::vector<float>& bias, const std::vector<int64_t>& routed,
                                 double coeff) {
  const double E = double(routed.size());
  double load = 0;
  for (const int64_t n : routed) load += double(n);
  load /= E;
  const float c = float(coeff);
  std::vector<float> delta;
  double sum = 0;
  for (const int64_t n : routed) {
    delta.push_back(load > double(n) ? c : load < double(n) ? -c : 0.0f);
    sum += double(delta.back());
  }
  const float mean = float(sum / E);
  std::vector<float> out;
  for (size_t e = 0; e < bias.size(); ++e) out.push_back(bias[e] + (delta[e] - mean));
  return out;
}

// max_e routed_e / mean_e routed_e: 1 is perfect balance.
double peak_load(const std::vector<int64_t>& routed) {
  double total = 0;
  for (const int64_t n : routed) total += double(n);
  return double(*std::max_element(routed.begin(), routed.end())) / (total / double(routed.size()));
}

TEST(LoadBalance, BiasUpdateByHand) {
  // Mean load 6: expert 0 over, expert 1 under, 2 and 3 on it; the deltas
  // already average to 0.
  EXPECT_EQ(balance_score_bias({0, 0, 0, 0}, {10, 2, 6, 6}, 0.25),
            (std::vector<float>{-0.25f, 0.25f, 0, 0}));
  // Mean 3: one over, three under; mean(delta) = 0.25 (3 - 1) / 4 = 0.125.
  EXPECT_EQ(balance_score_bias({1, 0, -1, 0.5f}, {9, 1, 1, 1}, 0.25),
            (std::vector<float>{1 - 0.375f, 0.125f, -1 + 0.125f, 0.5f + 0.125f}));
  // Even loads, or a coefficient of 0, change nothing.
  EXPECT_EQ(balance_score_bias({0.5f, -0.5f}, {7, 7}, 0.25), (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(balance_score_bias({0.5f, -0.5f}, {9, 1}, 0), (std::vector<float>{0.5f, -0.5f}));
  // The coefficient is rounded to f32 before it is added: 0.1f, not 0.1.
  EXPECT_EQ(balance_score_bias({0, 0}, {1, 3}, 0.1), (std::vector<float>{0.1f, -0.1f}));
  expect_error(
      [] {
        balance_score_bias({0, 0}, {1, 2, 3}, 0.1);
      },
      {"balance_score_bias: 2 biases for 3 experts' counts"});
  expect_error([] { balance_score_bias({0, 0}, {1, -2}, 0.1); }, {"a negative count -2"});
  expect_error([] { balance_score_bias({0}, {1}, -1); }, {"coeff must be finite and >= 0"});
}

TEST(LoadBalance, ConfigFieldIsCheckedWrittenAndReadBack) {
  LlamaConfig c = deepseek_run(0.001, 1).model;
  c.validate();
  EXPECT_NE(c.describe().find("with bias balanced by 0.001 per step"), std::string::npos)
      << c.describe();
  // reprise's own field in config.json, read back to the same config, and
  // kept by the training state's config.
  const json::Value j = llama_config_to_json(c);
  ASSERT_NE(j.find("reprise_load_balance_coeff"), nullptr);
  EXPECT_EQ(j.find("reprise_load_balance_coeff")->as_double(), 0.001);
  EXPECT_EQ(llama_config_from_json(json::parse(json::dump(j))), c);
  // With the load-balancing loss too (DeepSeek-V3 trained with both, the
  // loss tiny): its weight, which DeepSeek's config has no field for, reads
  // back as well (a resumed run trains with it).
  LlamaConfig both = c;
  both.moe->router_aux_loss_coef = 0.001;
  EXPECT_EQ(llama_config_from_json(llama_config_to_json(both)), both);
  ASSERT_EQ(c.moe->router_aux_loss_coef, 0);  // DeepSeek-V3's default: not written
  EXPECT_EQ(j.find("router_aux_loss_coef"), nullptr);
  TrainConfig t = deepseek_run(0.001, 1);
  EXPECT_EQ(TrainConfig::from_json(json::parse(json::dump(t.to_json())), "cfg").model, t.model);
  // Off by default, and then not written.
  LlamaConfig off = c;
  off.moe->load_balance_coeff = 0;
  EXPECT_EQ(llama_config_to_json(off).find("reprise_load_balance_coeff"), nullptr);
  EXPECT_EQ(off.describe().find("balanced"), std::string::npos);
  // A run setting: a resume may not change it.
  TrainConfig other = t;
  other.model.moe->load_balance_coeff = 0.002;
  ASSERT_EQ(t.run_differences(other).size(), 1u);
  EXPECT_NE(t.run_differences(other)[0].find("balanced by 0.002"), std::string::npos);

  for (const double bad : {-1e-3, std::nan(""), std::numeric_limits<double>::infinity()}) {
    LlamaConfig b = c;
    b.moe->load_balance_coeff = bad;
    expect_error([&] { b.validate(); }, {"MoeConfig: load_balance_coeff must be finite and >= 0"});
  }
  // Only a routing bias can be balanced: not Mixtral's softmax router.
  MoeConfig mixtral;
  mixtral.load_balance_coeff = 0.001;
  expect_error([&] { mixtral.validate(); },
               {"MoeConfig: load_balance_coeff 0.001 needs score_correction_bias"});
  json::Value mixtral_json = llama_config_to_json(LlamaConfig{.family = Family::mixtral,
                                                              .hidden_size = 32,
                                                              .intermediate_size = 64,
                                                              .num_hidden_layers = 1,
                                                              .num_attention_heads = 2,
                                                              .num_key_value_heads = 2,
                                                              .moe = MoeConfig{}});
  mixtral_json.set("reprise_load_balance_coeff", 0.01);
  expect_error([&] { llama_config_from_json(mixtral_json, "mixtral/config.json"); },
               {"mixtral/config.json: ", "load_balance_coeff 0.01 needs score_correction_bias"});
}

TEST(LoadBalance, OneStepMovesTheBiasByTheStepsCounts) {
  const double coeff = 0.01;
  Trainer t(deepseek_run(coeff, 4), corpus());
  const std::vector<std::vector<float>> before = biases(t);
  ASSERT_EQ(before.size(), 2u);
  for (const std::vector<float>& b : before) EXPECT_EQ(b, std::vector<float>(8, 0.0f));
  const Trainer::StepStats s = t.step();
  ASSERT_FALSE(s.skipped);
  ASSERT_EQ(s.moe.size(), 2u);
  const std::vector<std::vector<float>> after = biases(t);
  for (size_t l = 0; l < 2; ++l) {
    const std::vector<int64_t> routed = s.moe[l].routed.to_vector<int64_t>();
    int64_t total = 0;
    for (const int64_t n : routed) total += n;
    EXPECT_EQ(total, 4 * 32 * 3) << "every token's top-3 is counted";
    EXPECT_EQ(f32_bits(after[l]), f32_bits(expected_bias(before[l], routed, coeff)))
        << s.moe[l].layer;
    // Overloaded experts' bias went down, underloaded ones' up.
    int over = 0, under = 0;
    for (size_t e = 0; e < routed.size(); ++e) {
      if (8 * routed[e] > total) {
        EXPECT_LT(after[l][e], 0.0f) << s.moe[l].layer << " expert " << e;
        ++over;
      } else if (8 * routed[e] < total) {
        EXPECT_GT(after[l][e], 0.0f) << s.moe[l].layer << " expert " << e;
        ++under;
      }
    }
    EXPECT_GT(over, 0);
    EXPECT_GT(under, 0);
  }
  // The next step starts from the updated bias.
  const Trainer::StepStats s2 = t.step();
  const std::vector<std::vector<float>> later = biases(t);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(f32_bits(later[l]),
              f32_bits(expected_bias(after[l], s2.moe[l].routed.to_vector<int64_t>(), coeff)));
  }
}

TEST(LoadBalance, OffOrSkippedTheBiasStays) {
  Trainer off(deepseek_run(0, 3), corpus());
  for (int i = 0; i < 3; ++i) off.step();
  for (const std::vector<float>& b : biases(off)) EXPECT_EQ(b, std::vector<float>(8, 0.0f));

  // A step whose loss is not finite (the head poisoned after the MoE
  // layers, so routing is as before) updates nothing, the bias included.
  Trainer skips(deepseek_run(0.01, 3), corpus());
  skips.set_on_nonfinite(OnNonFinite::skip);
  skips.step();
  const std::vector<std::vector<float>> before = biases(skips);
  ASSERT_NE(before[0], std::vector<float>(8, 0.0f));
  skips.model().lm_head()->weight().data<float>()[0] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(skips.step().skipped);
  EXPECT_EQ(f32_bits(biases(skips)[0]), f32_bits(before[0]));
  EXPECT_EQ(f32_bits(biases(skips)[1]), f32_bits(before[1]));
}

// Measured: over steps 21-30 the busiest expert carries 2.19x the mean load
// without balancing and 1.79x with coeff 0.01 (mean over the two MoE
// layers' steps).
TEST(LoadBalance, LoadsBecomeMoreBalanced) {
  auto late_peak = [](double coeff) {
    Trainer t(deepseek_run(coeff, 30), corpus());
    double sum = 0;
    int n = 0;
    for (int step = 1; step <= 30; ++step) {
      const Trainer::StepStats s = t.step();
      if (step <= 20) continue;
      for (const MoeRouterTerms& layer : s.moe) {
        sum += peak_load(layer.routed.to_vector<int64_t>());
        ++n;
      }
    }
    return sum / n;
  };
  const double unbalanced = late_peak(0), balanced = late_peak(0.01);
  std::printf("peak load over the mean, steps 21-30: %.3f without, %.3f with coeff 0.01\n",
              unbalanced, balanced);
  EXPECT_LT(balanced, unbalanced - 0.2);
}

TEST(LoadBalance, ResumeIsBitwise) {
  const TrainConfig c = deepseek_run(0.01, 4);
  Trainer straight(c, corpus());
  std::vector<float> losses;
  for (int i = 0; i < 4; ++i) losses.push_back(straight.step().loss);

  const std::string dir = testing::fresh_temp_dir("load_balance_resume");
  {
    Trainer first(c, corpus());
    first.step();
    first.step();
    save_train_state(first, dir);
  }
  Trainer resumed(read_train_state_info(dir).config, corpus());
  EXPECT_EQ(resumed.config().model.moe->load_balance_coeff, 0.01);
  load_train_state(resumed, dir);
  EXPECT_NE(biases(resumed)[0], std::vector<float>(8, 0.0f)) << "the bias is part of the state";
  EXPECT_EQ(resumed.step().loss, losses[2]);
  EXPECT_EQ(resumed.step().loss, losses[3]);
  const std::vector<std::vector<float>> a = biases(straight), b = biases(resumed);
  for (size_t l = 0; l < a.size(); ++l) EXPECT_EQ(f32_bits(a[l]), f32_bits(b[l]));
  std::filesystem::remove_all(dir);
}

// Two micro-batches of 2 sequences count what one batch of the same 4
// sequences counts (routing a token does not depend on its batch-mates, and
// no capacity limit drops any), so the first update is the same, and the
// formula of the summed counts; the routing margins count together too.
TEST(LoadBalance, AccumulatedMicroBatchesCountTogether) {
  // A bf16 gate, whose equal logits make near-ties to count.
  TrainConfig single = deepseek_run(0.01, 2);
  single.model.moe->router_dtype = RouterDType::bf16;
  TrainConfig accumulate = single;
  accumulate.batch = 2;
  accumulate.grad_accum = 2;
  Trainer two(accumulate, corpus());
  Trainer one(single, corpus());
  const std::vector<std::vector<float>> start = biases(two);
  const Trainer::StepStats s2 = two.step(), s1 = one.step();
  int64_t near_ties = 0;
  for (size_t l = 0; l < 2; ++l) near_ties += s1.moe[l].stats().within_ulps.front();
  EXPECT_GT(near_ties, 0);
  for (size_t l = 0; l < 2; ++l) {
    const std::vector<int64_t> routed = s2.moe[l].routed.to_vector<int64_t>();
    EXPECT_EQ(routed, s1.moe[l].routed.to_vector<int64_t>());
    // The routing margins too: the near-tie counts of both micro-batches.
    EXPECT_EQ(s2.moe[l].stats().within_ulps, s1.moe[l].stats().within_ulps);
    EXPECT_EQ(s2.moe[l].stats().tokens, s1.moe[l].stats().tokens);
    EXPECT_EQ(f32_bits(biases(two)[l]), f32_bits(expected_bias(start[l], routed, 0.01)));
    EXPECT_EQ(f32_bits(biases(two)[l]), f32_bits(biases(one)[l]));
  }
}

}  // namespace
}  // namespace reprise::nn
