// An MoE Llama (LlamaConfig::moe): Mixtral's parameter names, the training
// loss with the router losses (train mode only), per-layer statistics, the
// Mixtral config.json round trip and its errors, and a training run that
// resumes bit for bit from a checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "autograd/backward.h"
#include "io/json.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "nn/train_state.h"
#include "nn/trainer.h"
#include "ops/binary.h"
#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"

namespace reprise::nn {
namespace {

namespace fs = std::filesystem;

LlamaConfig moe_llama() {
  LlamaConfig c;
  c.vocab_size = 48;
  c.hidden_size = 16;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 32;
  c.family = Family::mixtral;
  c.moe = MoeConfig{};
  c.moe->num_local_experts = 3;
  c.moe->num_experts_per_tok = 2;
  c.moe->router_aux_loss_coef = 0.1;
  c.moe->router_z_loss_coef = 0.01;
  return c;
}

Tensor ids(int64_t B, int64_t T, int64_t vocab) {
  std::vector<int64_t> v(size_t(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7 + 3) % size_t(vocab));
  return Tensor::from_vector(v, {B, T});
}

using testing::error_of;

TEST(MoeModel, ParametersHaveMixtralsOnDiskNames) {
  LlamaConfig c = moe_llama();
  c.moe->n_shared_experts = 1;
  LlamaForCausalLM m(c);
  std::vector<std::string> layer0;
  for (const NamedParameter& p : m.parameters()) {
    if (p.name.rfind("model.layers.0.", 0) == 0) layer0.push_back(p.name.substr(15));
  }
  const std::vector<std::string> expected{
      "self_attn.q_proj.weight",
      "self_attn.k_proj.weight",
      "self_attn.v_proj.weight",
      "self_attn.o_proj.weight",
      "block_sparse_moe.gate.weight",
      "block_sparse_moe.experts.0.w1.weight",
      "block_sparse_moe.experts.0.w2.weight",
      "block_sparse_moe.experts.0.w3.weight",
      "block_sparse_moe.experts.1.w1.weight",
      "block_sparse_moe.experts.1.w2.weight",
      "block_sparse_moe.experts.1.w3.weight",
      "block_sparse_moe.experts.2.w1.weight",
      "block_sparse_moe.experts.2.w2.weight",
      "block_sparse_moe.experts.2.w3.weight",
      "block_sparse_moe.shared_experts.gate_proj.weight",
      "block_sparse_moe.shared_experts.up_proj.weight",
      "block_sparse_moe.shared_experts.down_proj.weight",
      "input_layernorm.weight",
      "post_attention_layernorm.weight",
  };
  EXPECT_EQ(layer0, expected);
  EXPECT_EQ(m.parameter("model.layers.1.block_sparse_moe.experts.2.w2.weight").shape(),
            (Shape{16, 12}));
  EXPECT_EQ(m.parameter("model.layers.1.block_sparse_moe.gate.weight").shape(), (Shape{3, 16}));
  EXPECT_EQ(m.model.layers[0].mlp, nullptr);
}

TEST(MoeModel, TrainingLossAddsTheRouterLossesInTrainModeOnly) {
  LlamaForCausalLM m(moe_llama());
  const Tensor x = ids(2, 8, 48);
  CausalLMOutput out = m.forward(x);
  const float ce = LlamaForCausalLM::loss(out.logits, x).item<float>();
  const float aux = out.router_losses().aux.item<float>();
  const float z = out.router_losses().z.item<float>();
  EXPECT_GT(aux, 0.9f);  // E * sum f_e P_e is 1 when balanced, more otherwise
  EXPECT_GT(z, 0.0f);
  const float total = m.causal_lm_loss(out, x).item<float>();
  EXPECT_EQ(total, (ce + aux * 0.1f) + z * 0.01f);  // same f32 operations, same order

  // The per-layer values combine to the model's: aux over both layers'
  // rows concatenated, z the mean of the layers' means (equal rows).
  const std::vector<MoeLayerStats> s = out.moe_stats();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NEAR(z, (s[0].z_loss + s[1].z_loss) / 2, 1e-5);
  EXPECT_EQ(s[0].layer, "model.layers.0.block_sparse_moe");
  EXPECT_EQ(s[0].tokens, 16);
  EXPECT_EQ(s[0].tokens_per_expert.size(), 3u);

  m.eval();
  out = m.forward(x);
  EXPECT_EQ(m.causal_lm_loss(out, x).item<float>(),
            LlamaForCausalLM::loss(out.logits, x).item<float>());

  LlamaConfig dense = moe_llama();
  dense.family = Family::llama;
  dense.moe.reset();
  LlamaForCausalLM d(dense);
  const CausalLMOutput dense_out = d.forward(x);
  EXPECT_TRUE(dense_out.moe.empty());
  EXPECT_FALSE(dense_out.router_losses().aux.defined());
}

TEST(MoeModel, FlopsCountTheActiveExpertsOnly) {
  LlamaConfig c = moe_llama();
  LlamaForCausalLM m(c);
  // Dense with the same attention: the MLP's 3 F C weights become the gate
  // (E C) plus k of E experts' 3 F C each.
  LlamaConfig d = c;
  d.family = Family::llama;
  d.moe.reset();
  LlamaForCausalLM dense(d);
  const double per_layer = 3.0 * 16 + (2.0 / 3.0) * 3 * 3 * 12 * 16 - 3 * 12 * 16;
  EXPECT_NEAR(m.training_flops_per_token(8) - dense.training_flops_per_token(8),
              6.0 * 2 * per_layer, 1e-6);
}

// A fresh directory under the test's temp dir.
std::string fresh_moe_dir(const std::string& name) {
  return testing::fresh_temp_dir("moe_" + name);
}

TEST(MoeModel, MixtralFolderRoundTrips) {
  LlamaConfig c = moe_llama();
  c.moe->capacity_factor = 1.5;
  c.moe->n_shared_experts = 2;
  c.moe->scoring_func = RouterScoring::sigmoid;
  c.moe->norm_topk_prob = false;
  c.moe->router_dtype = RouterDType::bf16;
  LlamaForCausalLM m(c);
  const std::string dir = fresh_moe_dir("folder");
  save_model(m, dir);
  const json::Value j = llama_config_to_json(c);
  EXPECT_EQ(j.find("model_type")->as_string(), "mixtral");
  EXPECT_EQ(json::dump(*j.find("architectures")), "[\"MixtralForCausalLM\"]");
  EXPECT_TRUE(j.find("sliding_window")->is_null());
  auto back = load_model(dir);
  EXPECT_TRUE(back->config() == c);
  const auto a = m.named_parameters(), b = back->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
  }
  fs::remove_all(dir);

  // Mixtral's defaults for absent fields.
  json::Value minimal = json::parse(
      R"({"model_type": "mixtral", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 8})");
  LlamaConfig mc = llama_config_from_json(minimal);
  ASSERT_TRUE(mc.moe.has_value());
  EXPECT_EQ(mc.moe->num_local_experts, 8);
  EXPECT_EQ(mc.moe->num_experts_per_tok, 2);
  EXPECT_EQ(mc.moe->router_aux_loss_coef, 0.001);
  EXPECT_EQ(mc.num_key_value_heads, 8);
  EXPECT_EQ(mc.rope_theta, 1e6);
  EXPECT_EQ(mc.rms_norm_eps, 1e-5);
}

TEST(MoeModel, UnsupportedMixtralFieldsAreClearErrors) {
  json::Value base = llama_config_to_json(moe_llama());
  auto with = [&](const char* key, json::Value v) {
    json::Value c = base;
    c.set(key, std::move(v));
    return error_of([&] { llama_config_from_json(c, "cfg.json"); });
  };
  std::string m = with("router_jitter_noise", 0.01);
  EXPECT_NE(m.find("\"router_jitter_noise\" is 0.01"), std::string::npos) << m;
  m = with("num_experts_per_tok", int64_t(4));
  EXPECT_NE(m.find("num_experts_per_tok must be in [1, num_local_experts = 3], got 4"),
            std::string::npos)
      << m;
  m = with("scoring_func", "noaux_tc");
  EXPECT_NE(m.find("\"scoring_func\" is \"noaux_tc\""), std::string::npos) << m;
}

TEST(MoeModel, TrainingResumesBitForBit) {
  TrainConfig c;
  c.model = moe_llama();
  c.model.vocab_size = 256;            // bytes
  c.model.moe->capacity_factor = 1.0;  // drops some assignments
  c.steps = 4;
  c.batch = 2;
  c.seq = 16;
  c.warmup = 1;
  c.checkpointing.set_policy("full");
  const auto data = std::make_shared<const TextDataset>(TextDataset::builtin(kCorpusSeed, 20000));
  // The config's JSON carries every MoE field.
  EXPECT_TRUE(TrainConfig::from_json(json::parse(json::dump(c.to_json())), "cfg").model == c.model);

  Trainer straight(c, data);
  std::vector<float> losses;
  std::vector<MoeLayerStats> stats;
  for (int i = 0; i < 4; ++i) {
    const Trainer::StepStats s = straight.step();
    losses.push_back(s.loss);
    stats = CausalLMOutput{.moe = s.moe}.moe_stats();
  }
  EXPECT_GT(stats[0].tokens_dropped + stats[1].tokens_dropped, 0);

  const std::string dir = fresh_moe_dir("resume");
  {
    Trainer first(c, data);
    first.step();
    first.step();
    save_train_state(first, dir);
  }
  Trainer resumed(read_train_state_info(dir).config, data);
  load_train_state(resumed, dir);
  EXPECT_EQ(resumed.step().loss, losses[2]);
  EXPECT_EQ(resumed.step().loss, losses[3]);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace reprise::nn
