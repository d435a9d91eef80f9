// A 16-block transformer stack under checkpoint policies: gradients are
// bitwise equal to no checkpointing, and MemoryStats shows what each policy
// keeps.
#include <gtest/gtest.h>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/planner.h"
#include "engine/memory_stats.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/gradcheck.h"

namespace reprise::autograd {
namespace {

// B = batch, T = sequence, C = channels, H = heads, D = C / H, F = MLP width
constexpr int64_t B = 2, T = 32, C = 64, H = 4, D = C / H, F = 128;
constexpr int kBlocks = 16;

struct Block {
  Tensor norm1, wq, wk, wv, wo, norm2, wg, wu, wd;
  explicit Block(uint64_t seed) {
    auto w = [&](Shape s, uint64_t k) {
      Tensor t = testing::uniform(s, -0.15, 0.15, seed * 16 + k, DType::f32).requires_grad(true);
      t.storage()->set_kind(MemoryKind::parameter);
      return t;
    };
    norm1 = w({C}, 0);
    wq = w({C, C}, 1);
    wk = w({C, C}, 2);
    wv = w({C, C}, 3);
    wo = w({C, C}, 4);
    norm2 = w({C}, 5);
    wg = w({F, C}, 6);
    wu = w({F, C}, 7);
    wd = w({C, F}, 8);
  }
  std::vector<Tensor> params() const { return {norm1, wq, wk, wv, wo, norm2, wg, wu, wd}; }

  // x: (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x) const {
    Tensor h = ops::rmsnorm(x, norm1);
    auto heads = [&](const Tensor& w) {  // (B, T, C) -> (B, H, T, D)
      return ops::transpose(ops::reshape(ops::linear(h, w), {B, T, H, D}), 1, 2);
    };
    Tensor a = ops::scaled_dot_product_attention(heads(wq), heads(wk), heads(wv), {.causal = true});
    a = ops::reshape(ops::transpose(a, 1, 2), {B, T, C});
    Tensor r = ops::add(x, ops::linear(a, wo));
    Tensor h2 = ops::rmsnorm(r, norm2);
    Tensor m = ops::linear(ops::mul(ops::silu(ops::linear(h2, wg)), ops::linear(h2, wu)), wd);
    return ops::add(r, m);
  }
};

struct Result {
  std::vector<std::vector<float>> grads;
  int64_t peak_saved = 0;
};

class TransformerStack : public ::testing::Test {
 protected:
  TransformerStack() {
    for (int i = 0; i < kBlocks; ++i) blocks.emplace_back(uint64_t(i + 1));
    x = testing::uniform({B, T, C}, -1, 1, 99, DType::f32);
  }

  Result step(const Policy* policy) {
    for (auto& b : blocks) {
      for (auto& p : b.params()) p.set_grad(Tensor());
    }
    memory_stats::reset_peaks();
    int64_t base = memory_stats::snapshot()[MemoryKind::saved_activation].live;
    Tensor h = x;
    for (int i = 0; i < kBlocks; ++i) {
      auto f = [&, i, in = h] { return blocks[size_t(i)].forward(in); };
      h = policy ? checkpoint("layers." + std::to_string(i), *policy, f) : f();
    }
    Result r;
    r.peak_saved = memory_stats::snapshot()[MemoryKind::saved_activation].peak - base;
    backward(ops::mean(ops::mul(h, h)));
    for (auto& b : blocks) {
      for (auto& p : b.params()) r.grads.push_back(p.grad().to_vector<float>());
    }
    return r;
  }

  std::vector<Block> blocks;
  Tensor x;
};

TEST_F(TransformerStack, PoliciesAreExactAndFullKeepsBlockInputsOnly) {
  Result none = step(nullptr);
  Policy full = policies::full();
  Policy sac = policies::op_sac({"linear", "sdpa"});
  Result with_full = step(&full);
  Result with_sac = step(&sac);
  EXPECT_EQ(with_full.grads, none.grads);
  EXPECT_EQ(with_sac.grads, none.grads);

  const int64_t block_input = B * T * C * 4;
  const int64_t one_block = none.peak_saved / kBlocks;
  // Full: every block's input plus one block's activations while it runs.
  EXPECT_LE(with_full.peak_saved, (kBlocks + 1) * block_input + one_block);
  EXPECT_LT(with_full.peak_saved, none.peak_saved / 4);
  // Op-level SAC keeps some matmul and attention outputs: between the two.
  EXPECT_GT(with_sac.peak_saved, with_full.peak_saved);
  EXPECT_LT(with_sac.peak_saved, none.peak_saved);
  std::printf("peak saved activations: none %lld, op-sac %lld, full %lld bytes\n",
              (long long)none.peak_saved, (long long)with_sac.peak_saved,
              (long long)with_full.peak_saved);
}

TEST_F(TransformerStack, BudgetPlanStaysWithinItsBudgetAndIsExact) {
  Result none = step(nullptr);
  BudgetPlanner planner(int64_t(0.3 * double(none.peak_saved)));
  Policy budget = planner.policy();
  EXPECT_EQ(step(&budget).grads, none.grads);  // the recording step
  planner.plan();
  Result planned = step(&budget);
  EXPECT_EQ(planned.grads, none.grads);
  BudgetPlanner::Summary s = planner.summary();
  EXPECT_LE(s.planned_bytes, s.budget);
  // Regions drop what they recompute as they record, so the peak is the
  // plan plus the working set of the op that is running (a few activations).
  EXPECT_LE(planned.peak_saved, s.budget + 4 * B * T * C * 4);
  std::printf("budget %lld, planned %lld, measured peak %lld bytes\n", (long long)s.budget,
              (long long)s.planned_bytes, (long long)planned.peak_saved);
  EXPECT_LT(s.replay_flops, s.full_replay_flops);
}

}  // namespace
}  // namespace reprise::autograd
