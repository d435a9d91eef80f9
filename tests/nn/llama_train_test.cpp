// Training the example Llama through nn::Trainer, the library under
// examples/llama_train: the loss falls on the built-in corpus, evaluation
// leaves the run alone, a resumed run repeats an uninterrupted one bit for
// bit (dropout on, under every checkpoint policy, on another thread count),
// and the gradient dump holds what it says.

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/threads.h"
#include "io/safetensors.h"
#include "nn/train_state.h"
#include "nn/trainer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_train.h"

namespace reprise::nn {
namespace {

namespace fs = std::filesystem;

TrainConfig tiny_config() {
  return testing::tiny_train_config(/*hidden=*/32, /*intermediate=*/64, /*steps=*/6, /*batch=*/4,
                                    /*seq=*/32);
}

std::shared_ptr<const TextDataset> tiny_data() { return testing::builtin_corpus(100000); }

// A fresh directory under the test's temp dir.
std::string fresh_run_dir(const std::string& name) {
  return testing::fresh_temp_dir("llama_train_" + name);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> parameter_values(const Trainer& t) {
  std::vector<float> out;
  for (const NamedParameter& p : t.model().parameters()) {
    const std::vector<float> v = p.value.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(LlamaTrain, LossFallsFarBelowUniformOnTheBuiltinCorpus) {
  TrainConfig c = tiny_config();
  c.steps = 40;
  c.batch = 8;
  c.seq = 64;
  c.warmup = 5;
  Trainer t(c, tiny_data());
  const double initial_val = t.evaluate(2);
  EXPECT_NEAR(initial_val, std::log(256.0), 0.1);  // small initial weights: near uniform
  std::vector<float> losses;
  while (!t.finished()) losses.push_back(t.step().loss);
  double last = 0;
  for (size_t i = losses.size() - 10; i < losses.size(); ++i) last += losses[i] / 10;
  EXPECT_LT(last, 3.0) << "first loss " << losses.front();
  EXPECT_LT(t.evaluate(2), 3.0);
}

TEST(LlamaTrain, EvaluationDoesNotChangeTheRun) {
  TrainConfig c = tiny_config();
  c.model.dropout = 0.1;
  Trainer a(c, tiny_data()), b(c, tiny_data());
  for (int i = 0; i < 3; ++i) {
    const double v = b.evaluate(2);
    EXPECT_EQ(v, b.evaluate(2));
    EXPECT_EQ(bits(a.step().loss), bits(b.step().loss)) << "step " << i + 1;
  }
  EXPECT_EQ(a.generator().state(), b.generator().state());
  EXPECT_TRUE(b.model().training());
}

struct ResumeCase {
  const char* policy;
  autograd::RngReplay rng;
  int threads_after_resume;  // 0: unchanged
};

class ResumeTest : public ::testing::TestWithParam<ResumeCase> {};

// 6 steps straight through with no checkpointing, against 3 steps under the
// case's policy, a save, a new Trainer that loads it, and 3 more steps.
TEST_P(ResumeTest, LossesAndStateAreBitwiseThoseOfAnUninterruptedRun) {
  TrainConfig plain = tiny_config();
  plain.model.dropout = 0.1;
  plain.model.attention_dropout = 0.1;
  Trainer straight(plain, tiny_data());
  std::vector<uint32_t> expected;
  while (!straight.finished()) expected.push_back(bits(straight.step().loss));

  TrainConfig c = plain;
  c.checkpointing.set_policy(GetParam().policy);
  c.checkpointing.rng_replay = GetParam().rng;
  c.checkpointing.verify = autograd::Verify::metadata;
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const std::string dir = fresh_run_dir(name);
  std::vector<uint32_t> got;
  {
    Trainer first(c, tiny_data());
    for (int i = 0; i < 3; ++i) got.push_back(bits(first.step().loss));
    save_train_state(first, dir);
  }
  const int threads_before = threads::num_threads();
  if (GetParam().threads_after_resume > 0)
    threads::set_num_threads(GetParam().threads_after_resume);
  Trainer second(read_train_state_info(dir).config, tiny_data());
  load_train_state(second, dir);
  EXPECT_EQ(second.steps_done(), 3);
  while (!second.finished()) got.push_back(bits(second.step().loss));
  threads::set_num_threads(threads_before);

  EXPECT_EQ(got, expected);
  EXPECT_TRUE(parameter_values(second) == parameter_values(straight));
  EXPECT_EQ(second.generator().state(), straight.generator().state());
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ResumeTest,
    ::testing::Values(ResumeCase{"none", autograd::RngReplay::recorded, 0},
                      ResumeCase{"full", autograd::RngReplay::recorded, 0},
                      ResumeCase{"every-n-layers:2", autograd::RngReplay::recorded, 0},
                      ResumeCase{"op-sac", autograd::RngReplay::recorded, 0},
                      ResumeCase{"budget:64K", autograd::RngReplay::recorded, 0},
                      ResumeCase{"full", autograd::RngReplay::stash, 0},
                      ResumeCase{"full", autograd::RngReplay::recorded, 1}),
    [](const auto& info) {
      std::string name = std::string(info.param.policy) + "_" +
                         autograd::rng_replay_name(info.param.rng) +
                         (info.param.threads_after_resume ? "_one_thread" : "");
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(LlamaTrain, GradientDumpHoldsTheFirstBatchBeforeTheUpdate) {
  TrainConfig c = tiny_config();
  c.grad_clip = 1e-3;  // clipping would change every gradient: the dump must be from before it
  Trainer t(c, tiny_data());
  const std::string path = fresh_run_dir("dump") + ".safetensors";
  std::vector<std::pair<std::string, std::vector<float>>> grads;
  std::vector<int64_t> ids;
  const std::vector<float> params_before = parameter_values(t);
  const Trainer::StepStats s =
      t.step([&](const Batch& b, const CausalLMOutput& out, const Tensor& loss) {
        write_gradient_dump(path, t.model(), b, out.logits, loss);
        ids = b.input_ids.to_vector<int64_t>();
        for (const NamedParameter& p : t.model().parameters())
          grads.emplace_back(p.name, p.value.grad().to_vector<float>());
      });
  EXPECT_TRUE(parameter_values(t) != params_before);  // the update ran after the dump

  const auto dump = io::load_safetensors(path);
  const int64_t B = c.batch, T = c.seq, V = c.model.vocab_size;
  ASSERT_EQ(dump.size(), 4 + grads.size());
  EXPECT_EQ(dump.at("input_ids").shape(), (Shape{B, T}));
  EXPECT_EQ(dump.at("input_ids").dtype(), DType::i64);
  EXPECT_EQ(dump.at("input_ids").to_vector<int64_t>(), ids);
  EXPECT_EQ(dump.at("labels").dtype(), DType::i64);
  EXPECT_EQ(dump.at("labels").to_vector<int64_t>(), ids);  // HF's convention: the loss shifts
  EXPECT_EQ(dump.at("loss").shape(), Shape{});
  EXPECT_EQ(bits(dump.at("loss").item<float>()), bits(s.loss));
  EXPECT_EQ(dump.at("logits").shape(), (Shape{B, T, V}));
  // The dumped logits and labels give the dumped loss.
  const Tensor again = LlamaForCausalLM::loss(dump.at("logits"), dump.at("labels"));
  EXPECT_EQ(bits(again.item<float>()), bits(s.loss));

  double norm2 = 0;
  for (const auto& [name, g] : grads) {
    ASSERT_TRUE(dump.count(name)) << name;
    EXPECT_EQ(dump.at(name).shape(), t.model().parameter(name).shape()) << name;
    EXPECT_TRUE(dump.at(name).to_vector<float>() == g) << name;
    for (float x : g) norm2 += double(x) * x;
  }
  EXPECT_TRUE(dump.count("lm_head.weight") && dump.count("model.layers.1.mlp.down_proj.weight"));
  // Unclipped: their norm is the step's reported pre-clip norm, far above the clip.
  EXPECT_NEAR(std::sqrt(norm2), s.grad_norm, 1e-4 * s.grad_norm);
  EXPECT_GT(s.grad_norm, 100 * c.grad_clip);
  fs::remove(path);
}

}  // namespace
}  // namespace reprise::nn
