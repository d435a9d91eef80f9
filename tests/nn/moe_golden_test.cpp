// Parity with Hugging Face transformers' MixtralForCausalLM in f32
// (tests/fixtures/golden_moe.py): the tiny Mixtral folder loads through
// nn/hf with its on-disk names, and logits, router logits, the
// load-balancing loss, the loss HF trains on (cross-entropy +
// router_aux_loss_coef * aux) and every parameter gradient agree with
// PyTorch's.
//
// Tolerances, and why: both sides compute in f32 with the same formulas and
// the same routing (no router logit lies within 1e-2 of a top-2 boundary here, so
// f32 noise cannot flip an expert; a flip would move logits by 1e-1). They
// differ in summation orders (our tiled GEMM and grouped blocks vs
// MKL/oneDNN per expert, row sums, softmax by reciprocal) and libm vs
// SLEEF, a few ulps per op. Measured (2026-12-02): logits within 6e-7
// absolute, loss and aux bitwise, z within 2.4e-7, each gradient within
// 1.1e-6 of its tensor's largest entry. We allow 2e-5 on logits and losses and 1e-4 of the
// largest entry on gradients, with rtol 1e-3 (as the Llama golden test):
// 10-100x the noise, while a formula error (a wrong gate normalization,
// a missing aux term, an expert's w1/w3 swapped) moves them by 1e-2 or more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/backward.h"
#include "nn/hf.h"
#include "nn/llama.h"
#include "tests/support/golden.h"

namespace reprise::nn {
namespace {

using testing::all_close;
using testing::max_abs;

const testing::GoldenModel kMoeGolden{"moe_golden.safetensors", "mixtral_tiny"};

TEST(MoeGolden, ConfigMatchesTheFixture) {
  LlamaConfig c = read_llama_config(kMoeGolden.dir());
  ASSERT_TRUE(c.moe.has_value());
  EXPECT_EQ(c.moe->num_local_experts, 4);
  EXPECT_EQ(c.moe->num_experts_per_tok, 2);
  EXPECT_EQ(c.moe->router_aux_loss_coef, 0.05);
  EXPECT_EQ(c.moe->scoring_func, RouterScoring::softmax);
  EXPECT_TRUE(c.moe->norm_topk_prob);
  EXPECT_EQ(c.moe->capacity_factor, 0.0);
  EXPECT_EQ(c.moe->n_shared_experts, 0);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 24);
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.rope_theta, 10000.0);
}

TEST(MoeGolden, LogitsLossesAndEveryGradientMatchHuggingFace) {
  auto model = load_model(kMoeGolden.dir());
  const CausalLMOutput out = model->forward(kMoeGolden.get("input_ids"));
  EXPECT_TRUE(all_close(out.logits, kMoeGolden.get("logits"), 2e-5, 1e-3));
  const RouterLosses r = out.router_losses();
  EXPECT_TRUE(all_close(r.aux, kMoeGolden.get("aux_loss"), 2e-5, 1e-3));
  EXPECT_TRUE(all_close(r.z, kMoeGolden.get("z_loss"), 2e-5, 1e-3));
  Tensor loss = model->causal_lm_loss(out, kMoeGolden.get("labels"));
  EXPECT_TRUE(all_close(loss, kMoeGolden.get("loss"), 2e-5, 1e-3));
  // The per-layer statistics: every token routed to two experts.
  const std::vector<MoeLayerStats> stats = out.moe_stats();
  ASSERT_EQ(stats.size(), 2u);
  for (const MoeLayerStats& s : stats) {
    int64_t routed = 0;
    for (int64_t n : s.tokens_per_expert) routed += n;
    EXPECT_EQ(s.tokens, 32);
    EXPECT_EQ(routed, 64);
    EXPECT_EQ(s.tokens_dropped, 0);
  }
  EXPECT_EQ(stats[1].layer, "model.layers.1.block_sparse_moe");

  autograd::backward(loss);
  int checked = 0;
  for (const NamedParameter& p : model->parameters()) {
    SCOPED_TRACE(p.name);
    Tensor expected = kMoeGolden.get("grad." + p.name);
    ASSERT_TRUE(p.value.grad().defined());
    EXPECT_TRUE(all_close(p.value.grad(), expected, 1e-4 * max_abs(expected), 1e-3));
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 2 * (4 + 1 + 2 + 4 * 3) + 1);  // embed, head, per layer, final norm
}

// The golden routing is not near a tie: the smallest gap between the 2nd
// and 3rd router probability is far above f32 noise (see the tolerances).
TEST(MoeGolden, RoutingIsFarFromTies) {
  for (int layer = 0; layer < 2; ++layer) {
    Tensor l = kMoeGolden.get("router_logits." + std::to_string(layer));  // (32, 4)
    const std::vector<float> v = l.to_vector<float>();
    for (size_t n = 0; n < 32; ++n) {
      std::vector<float> row(v.begin() + long(n * 4), v.begin() + long(n * 4 + 4));
      std::sort(row.begin(), row.end());
      EXPECT_GT(row[2] - row[1], 1e-2) << "layer " << layer << " token " << n;
    }
  }
}

}  // namespace
}  // namespace reprise::nn
