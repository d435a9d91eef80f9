// Router replay: with ActivationCheckpointing::save_router (the default)
// a checkpointed MoE layer never re-decides its routing, so 1 ulp of
// recompute noise on the router's gate leaves the gradients bitwise equal
// to no checkpointing; with the router recomputed, the same noise changes
// the gradients and flips experts, and the bitwise verifier names the
// routing node (moe_route under "<layer>.block_sparse_moe.gate") with the
// number of changed assignments.
#include <gtest/gtest.h>

#include <bit>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/verifier.h"
#include "engine/grad_mode.h"
#include "nn/checkpointing.h"
#include "nn/llama.h"
#include "tests/support/tokens.h"

namespace reprise::nn {
namespace {

LlamaConfig moe_config() {
  LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 32;
  c.family = Family::mixtral;
  c.moe = MoeConfig{};
  c.moe->num_local_experts = 4;
  c.moe->num_experts_per_tok = 2;
  c.moe->router_z_loss_coef = 1e-3;
  return c;
}

// A model whose routers have experts 1 and 2 exactly tied (equal gate
// rows): every token's logits for them are equal, so any change in the
// last bit decides between them.
struct TiedRouters {
  rng::Generator gen{7};
  LlamaForCausalLM model{moe_config(), gen};
  Tensor ids = testing::random_token_ids(2, 16, 64, 11);

  TiedRouters() {
    NoGradGuard no_grad;
    for (size_t i = 0; i < model.model.layers.size(); ++i) {
      Tensor w = model.model.layers[i].moe->gate.weight();  // (E, C)
      Tensor row2 = w.slice(0, 2, 3);
      row2.copy_(w.slice(0, 1, 2));
    }
  }

  // Bit patterns of every gradient of one training step.
  std::vector<std::vector<uint32_t>> step() {
    model.zero_grad();
    const LlamaForCausalLM::LayerRunner run = layers ? layers->runner() : nullptr;
    autograd::backward(model.causal_lm_loss(model.forward(ids, run), ids));
    std::vector<std::vector<uint32_t>> out;
    for (const NamedParameter& p : model.parameters()) {
      std::vector<uint32_t> bits;
      for (float f : p.value.grad().to_vector<float>()) bits.push_back(std::bit_cast<uint32_t>(f));
      out.push_back(std::move(bits));
    }
    return out;
  }

  void checkpoint(bool save_router, int noise_ulps) {
    CheckpointConfig ac = CheckpointConfig::parse("full");
    ac.save_router = save_router;
    ac.verify = autograd::Verify::bitwise;
    ac.on_mismatch = autograd::OnMismatch::report;
    ac.recompute_noise_ulps = noise_ulps;
    ac.noise_scopes = "*.block_sparse_moe.gate";
    layers.emplace(ac, model.dropout_generator(), MoeScopes{.block = "block_sparse_moe"});
  }

  std::optional<LayerCheckpointing> layers;  // none: plain recording
};

TEST(MoeCheckpoint, RouterReplayIsBitwiseUnderRouterNoise) {
  TiedRouters r;
  autograd::take_mismatches();
  const auto expected = r.step();
  // Replay is exact without noise, with the router saved or recomputed.
  for (bool save_router : {true, false}) {
    r.checkpoint(save_router, 0);
    EXPECT_EQ(r.step(), expected) << "save_router " << save_router;
    EXPECT_TRUE(autograd::take_mismatches().empty());
  }
  // 1 ulp of noise on the router's nodes: nothing of the router is
  // replayed when it is saved, so neither noise nor mismatch.
  r.checkpoint(true, 1);
  const int64_t replays = autograd::recompute_stats().replays;
  EXPECT_EQ(r.step(), expected);
  EXPECT_EQ(autograd::recompute_stats().replays - replays, 2);  // both layers were recomputed
  EXPECT_TRUE(autograd::take_mismatches().empty());
}

TEST(MoeCheckpoint, RecomputedRouterFlipsExpertsAndTheVerifierNamesIt) {
  TiedRouters r;
  autograd::take_mismatches();
  const auto expected = r.step();
  r.checkpoint(false, 1);
  EXPECT_NE(r.step(), expected);
  const std::vector<autograd::Mismatch> found = autograd::take_mismatches();
  ASSERT_FALSE(found.empty());
  // Every perturbed node is the router's; the routing decision is among
  // them, with the changed (token, rank) assignments counted.
  int64_t flipped = 0;
  for (const autograd::Mismatch& m : found) {
    EXPECT_NE(m.scope.find(".block_sparse_moe"), std::string::npos) << m.describe();
    if (m.op == "moe_route" && m.output == 1) {
      EXPECT_TRUE(m.scope == "model.layers.0.block_sparse_moe.gate" ||
                  m.scope == "model.layers.1.block_sparse_moe.gate")
          << m.describe();
      EXPECT_EQ(m.region, m.scope.substr(0, m.scope.find(".block_sparse_moe")));
      EXPECT_GT(m.differing, 0);
      flipped += m.differing;
    }
  }
  EXPECT_GT(flipped, 0);
}

}  // namespace
}  // namespace reprise::nn
