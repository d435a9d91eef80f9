// nn/llama: Hugging Face names and scopes, initialisation, the shifted loss,
// and layer checkpointing: with dropout on, every policy gives gradients
// bitwise equal to no checkpointing (recorded RNG replay), while saving less.
#include "nn/llama.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>
#include <set>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/tape.h"
#include "engine/memory_stats.h"
#include "engine/threads.h"
#include "nn/checkpointing.h"
#include "ops/loss.h"
#include "tests/support/tokens.h"

namespace reprise::nn {
namespace {

using Kind = CheckpointConfig::Kind;

LlamaConfig small_config(double dropout = 0.0, double attention_dropout = 0.0) {
  LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 32;
  c.dropout = dropout;
  c.attention_dropout = attention_dropout;
  return c;
}

// Bit patterns of every parameter gradient, in parameters() order.
std::vector<std::vector<uint32_t>> grad_bits(const LlamaForCausalLM& m) {
  std::vector<std::vector<uint32_t>> out;
  for (const NamedParameter& p : m.parameters()) {
    std::vector<uint32_t> bits;
    for (float f : p.value.grad().to_vector<float>()) bits.push_back(std::bit_cast<uint32_t>(f));
    out.push_back(std::move(bits));
  }
  return out;
}

TEST(Llama, ParameterNamesAreHuggingFacesInStateDictOrder) {
  LlamaConfig c = small_config();
  c.num_hidden_layers = 2;
  LlamaForCausalLM m(c);
  std::vector<std::string> expected{"model.embed_tokens.weight"};
  for (int i = 0; i < 2; ++i) {
    std::string l = "model.layers." + std::to_string(i) + ".";
    for (const char* s : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                          "input_layernorm", "post_attention_layernorm"}) {
      expected.push_back(l + s + ".weight");
    }
  }
  expected.push_back("model.norm.weight");
  expected.push_back("lm_head.weight");
  std::vector<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, expected);
  EXPECT_EQ(m.parameter("model.layers.1.self_attn.k_proj.weight").shape(), (Shape{16, 32}));
  EXPECT_EQ(m.parameter("model.layers.0.mlp.down_proj.weight").shape(), (Shape{32, 48}));
  EXPECT_EQ(m.num_parameters(),
            2 * 64 * 32 + 32 + 2 * (32 * 32 * 2 + 16 * 32 * 2 + 3 * 32 * 48 + 64));

  c.tie_word_embeddings = true;
  LlamaForCausalLM tied(c);
  EXPECT_EQ(tied.lm_head(), nullptr);
  EXPECT_EQ(tied.parameters().size(), expected.size() - 1);
  EXPECT_EQ(tied.parameters().back().name, "model.norm.weight");
}

TEST(Llama, RecordedScopesAreParameterPaths) {
  struct Collect : autograd::TapeObserver {
    std::set<std::string> linear, sdpa;
    void on_record(const std::shared_ptr<autograd::Node>& n, const autograd::Tensors&,
                   const autograd::Tensors&) override {
      if (std::string(n->name()) == "linear") linear.insert(n->scope());
      if (std::string(n->name()).rfind("sdpa", 0) == 0) sdpa.insert(n->scope());
    }
  } seen;
  LlamaConfig c = small_config();
  c.num_hidden_layers = 1;
  LlamaForCausalLM m(c);
  for (auto kind : {Kind::none, Kind::full}) {
    seen.linear.clear();
    LayerCheckpointing layers({.kind = kind}, m.dropout_generator());
    {
      autograd::ObserveTape observe(seen);
      m.forward(testing::random_token_ids(1, 4, 64, 1), layers.runner());
    }
    // Every Linear's nodes carry its parameter's path, checkpointed or not.
    std::set<std::string> expected{"lm_head"};
    for (const NamedParameter& p : m.parameters()) {
      if (p.name.find("_proj.") != std::string::npos) {
        expected.insert(p.name.substr(0, p.name.size() - std::string(".weight").size()));
      }
    }
    EXPECT_EQ(seen.linear, expected);
    EXPECT_EQ(seen.sdpa, std::set<std::string>{"model.layers.0.self_attn"});
  }
}

TEST(Llama, InitialisesAsHuggingFaceFromTheGenerator) {
  LlamaConfig c = small_config();
  c.initializer_range = 0.05;
  rng::Generator a(7), b(7), other(8);
  LlamaForCausalLM ma(c, a), mb(c, b), mo(c, other);
  const std::vector<NamedParameter> pa = ma.parameters(), pb = mb.parameters(),
                                    po = mo.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    const NamedParameter& p = pa[i];
    std::vector<float> v = p.value.to_vector<float>();
    EXPECT_EQ(v, pb[i].value.to_vector<float>()) << p.name;
    if (p.value.dim() == 1) {
      EXPECT_EQ(v, std::vector<float>(v.size(), 1.0f)) << p.name;  // norms: ones
      continue;
    }
    EXPECT_NE(v, po[i].value.to_vector<float>()) << p.name;
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += double(x) * x;
    const double n = double(v.size()), mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 5 * 0.05 / std::sqrt(n)) << p.name;
    EXPECT_NEAR(sd, 0.05, 0.05 * 6 / std::sqrt(n)) << p.name;  // about 6 standard errors
  }
  EXPECT_EQ(ma.parameter("model.layers.0.self_attn.q_proj.weight").storage()->kind(),
            MemoryKind::parameter);
}

TEST(Llama, LossShiftsTheLabelsAsHuggingFace) {
  LlamaForCausalLM m(small_config());
  const int64_t B = 2, T = 5, V = 64;
  Tensor ids = testing::random_token_ids(B, T, V, 3);
  Tensor logits = m.forward(ids).logits;
  ASSERT_EQ(logits.shape(), (Shape{B, T, V}));
  std::vector<int64_t> lab = ids.to_vector<int64_t>();
  lab[0] = -100;  // never a target (position 0 has no predecessor)
  lab[2] = -100;  // row 0: logits[0, 1] has no target
  lab[T + 4] = -100;
  Tensor labels = Tensor::from_vector(lab, {B, T});
  // By hand: mean over (b, t) with t + 1 < T and a label at t + 1.
  std::vector<float> lg = logits.to_vector<float>();
  double sum = 0;
  int count = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t + 1 < T; ++t) {
      int64_t y = lab[size_t(b * T + t + 1)];
      if (y == -100) continue;
      const float* row = &lg[size_t((b * T + t) * V)];
      double mx = row[0], se = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) se += std::exp(double(row[v]) - mx);
      sum += mx + std::log(se) - row[y];
      ++count;
    }
  }
  EXPECT_EQ(count, 2 * 4 - 2);
  EXPECT_NEAR(LlamaForCausalLM::loss(logits, labels).item<float>(), sum / count, 1e-5);
  EXPECT_THROW(LlamaForCausalLM::loss(logits, ids.slice(1, 0, 4)), Error);
}

TEST(Llama, BadInputsRaiseClearErrors) {
  LlamaForCausalLM m(small_config());
  auto message = [&](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              m.forward(Tensor::zeros({2, 4}, DType::i32));
            }).find("dtype i64"),
            std::string::npos);
  EXPECT_NE(message([&] { m.forward(Tensor::zeros({8}, DType::i64)); }).find("(B, T)"),
            std::string::npos);
  EXPECT_NE(message([&] {
              m.forward(Tensor::zeros({1, 33}, DType::i64));
            }).find("max_position_embeddings = 32"),
            std::string::npos);
  EXPECT_THROW(m.forward(Tensor::full({1, 3}, 64, DType::i64)), Error);  // id out of range
  LlamaConfig c = small_config();
  c.num_key_value_heads = 3;
  EXPECT_NE(message([&] { c.validate(); }).find("num_key_value_heads 3"), std::string::npos);
  c = small_config();
  c.hidden_size = 30;
  EXPECT_NE(message([&] { LlamaForCausalLM bad(c); }).find("hidden_size 30"), std::string::npos);
  c = small_config();
  c.dropout = 1.0;
  EXPECT_NE(message([&] { c.validate(); }).find("dropout"), std::string::npos);
}

TEST(Llama, CheckpointSpecsParse) {
  EXPECT_EQ(CheckpointConfig::parse("none").kind, Kind::none);
  EXPECT_EQ(CheckpointConfig::parse("full").kind, Kind::full);
  EXPECT_EQ(CheckpointConfig::parse("op-sac").kind, Kind::op_sac);
  EXPECT_EQ(CheckpointConfig::parse("every-n-layers").every_n, 2);
  EXPECT_EQ(CheckpointConfig::parse("every-n-layers:3").every_n, 3);
  EXPECT_EQ(CheckpointConfig::parse("budget:4096").budget_bytes, 4096);
  EXPECT_EQ(CheckpointConfig::parse("budget:64M").budget_bytes, int64_t(64) << 20);
  EXPECT_EQ(CheckpointConfig::parse("budget:2g").budget_bytes, int64_t(2) << 30);
  for (const char* s : {"none", "full", "op-sac", "every-n-layers:3", "budget:1000"}) {
    EXPECT_EQ(CheckpointConfig::parse(s).policy_string(), s);
  }
  for (const char* bad :
       {"", "ful", "budget:", "budget:M", "budget:12X", "every-n-layers:0", "every-n-layers:-1",
        "budget:99999999999999999999", "budget:8589934592G"}) {
    EXPECT_THROW(CheckpointConfig::parse(bad), Error) << bad;
  }
}

// One training step's gradients with dropout on, from a fixed generator state.
struct DropoutRun {
  LlamaForCausalLM model{small_config(0.1, 0.2)};
  std::shared_ptr<rng::Generator> gen = std::make_shared<rng::Generator>(42);
  rng::GeneratorState start = gen->state();
  Tensor ids = testing::random_token_ids(2, 16, 64, 5);

  std::optional<LayerCheckpointing> layers;  // none: plain recording

  DropoutRun() { model.set_dropout_generator(gen); }

  void checkpoint(const CheckpointConfig& config) { layers.emplace(config, gen); }

  std::vector<std::vector<uint32_t>> step(int64_t* peak_saved = nullptr) {
    gen->set_state(start);
    model.zero_grad();
    memory_stats::reset_peaks();
    int64_t base = memory_stats::snapshot()[MemoryKind::saved_activation].live;
    const LlamaForCausalLM::LayerRunner run = layers ? layers->runner() : nullptr;
    Tensor loss = LlamaForCausalLM::loss(model.forward(ids, run).logits, ids);
    if (peak_saved)
      *peak_saved = memory_stats::snapshot()[MemoryKind::saved_activation].peak - base;
    autograd::backward(loss);
    return grad_bits(model);
  }
};

TEST(Llama, EveryCheckpointPolicyGivesBitwiseEqualGradientsWithDropout) {
  DropoutRun r;
  int64_t none_peak = 0;
  const auto expected = r.step(&none_peak);
  // Dropout really draws: a different generator state changes the gradients.
  r.gen->set_state(r.start);
  r.gen->reserve("dropout", 4);
  rng::GeneratorState shifted = r.gen->state();
  std::swap(r.start, shifted);
  EXPECT_NE(r.step(), expected);
  std::swap(r.start, shifted);

  for (const char* spec : {"none", "full", "every-n-layers:2", "op-sac"}) {
    SCOPED_TRACE(spec);
    r.checkpoint(CheckpointConfig::parse(spec));
    const int64_t replays = autograd::recompute_stats().replays;
    int64_t peak = 0;
    EXPECT_EQ(r.step(&peak), expected);
    const int64_t ran = autograd::recompute_stats().replays - replays;
    if (std::string(spec) == "none") {
      EXPECT_EQ(ran, 0);
      EXPECT_EQ(peak, none_peak);
    } else {
      EXPECT_EQ(ran, std::string(spec) == "every-n-layers:2" ? 2 : 3);  // layers 0 and 2
      EXPECT_LT(peak, none_peak);
    }
  }

  // Budget: the first step records (saving everything), the second plans
  // and recomputes part of each layer; both bitwise equal.
  r.checkpoint(CheckpointConfig::parse("budget:40K"));
  EXPECT_EQ(r.step(), expected);
  EXPECT_FALSE(r.layers->planner()->planned());
  int64_t budget_peak = 0;
  EXPECT_EQ(r.step(&budget_peak), expected);
  ASSERT_TRUE(r.layers->planner()->planned());
  autograd::BudgetPlanner::Summary s = r.layers->planner()->summary();
  EXPECT_LT(s.values_kept, s.values);
  EXPECT_LE(s.planned_bytes, 40 << 10);
  EXPECT_LT(budget_peak, none_peak);

  // Stash mode (PyTorch's preserve_rng_state=True, restoring the dropout
  // generator) is exact too, and the bitwise verifier passes.
  CheckpointConfig stash = CheckpointConfig::parse("full");
  stash.rng_replay = autograd::RngReplay::stash;
  stash.verify = autograd::Verify::bitwise;
  r.checkpoint(stash);
  EXPECT_EQ(r.step(), expected);
}

TEST(Llama, FreshRandomnessOnReplayGivesWrongGradients) {
  // PyTorch's preserve_rng_state=False failure, on purpose: the replayed
  // dropout masks differ from the forward's.
  DropoutRun r;
  const auto expected = r.step();
  CheckpointConfig fresh = CheckpointConfig::parse("full");
  fresh.rng_replay = autograd::RngReplay::fresh;
  r.checkpoint(fresh);
  EXPECT_NE(r.step(), expected);
}

TEST(Llama, VerifierNamesTheLayerWhenReplayIsNotExact) {
  DropoutRun r;
  CheckpointConfig noisy = CheckpointConfig::parse("full");
  noisy.verify = autograd::Verify::bitwise;
  noisy.recompute_noise_ulps = 1;
  r.checkpoint(noisy);
  try {
    r.step();
    FAIL() << "expected a recompute mismatch";
  } catch (const Error& e) {
    // Backward reaches the last layer first.
    EXPECT_NE(std::string(e.what()).find("recompute mismatch in region 'model.layers.2'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Llama, ResultsDoNotDependOnTheThreadCount) {
  DropoutRun r;
  const int threads = threads::num_threads();
  threads::set_num_threads(1);
  const auto one = r.step();
  threads::set_num_threads(std::max(2, threads));
  const auto many = r.step();
  threads::set_num_threads(threads);
  EXPECT_EQ(one, many);
}

TEST(Llama, EvalModeTurnsDropoutOff) {
  DropoutRun r;
  r.model.eval();
  NoGradGuard no_grad;
  r.gen->set_state(r.start);
  std::vector<float> a = r.model.forward(r.ids).logits.to_vector<float>();
  EXPECT_EQ(r.gen->offset("dropout"), 0u);  // nothing drawn
  std::vector<float> b = r.model.forward(r.ids).logits.to_vector<float>();
  EXPECT_EQ(a, b);
  r.model.train();
  EXPECT_NE(r.model.forward(r.ids).logits.to_vector<float>(), a);
}

TEST(Llama, TrainingFlopsCountTheProjectionsTheHeadAndCausalAttention) {
  LlamaConfig c = small_config();
  LlamaForCausalLM m(c);
  const double linear = 3 * (32 * 32 * 2 + 16 * 32 * 2 + 3 * 32 * 48) + 64 * 32;
  EXPECT_DOUBLE_EQ(m.training_flops_per_token(16), 6 * linear + 3 * 3 * 4 * 8 * 16 * 2.0);
  c.tie_word_embeddings = true;
  EXPECT_DOUBLE_EQ(LlamaForCausalLM(c).training_flops_per_token(16),
                   m.training_flops_per_token(16));
}

}  // namespace
}  // namespace reprise::nn
