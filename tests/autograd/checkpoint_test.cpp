// Checkpoint regions: replay from the tape is bitwise equal to keeping
// everything, under every policy and with nesting; memory falls; the
// verifier and noise injection behave; errors name the region.
#include "autograd/checkpoint.h"

#include <gtest/gtest.h>

#include <chrono>

#include "autograd/backward.h"
#include "engine/memory_stats.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/gradcheck.h"

namespace reprise::autograd {
namespace {

using testing::uniform;

// A small elementwise "block": h = x + tanh(x * w) * silu(x + b); several
// saved tensors of several ops, both input and output slots.
Tensor block(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor a = ops::tanh(ops::mul(x, w));
  Tensor g = ops::silu(ops::add(x, b));
  return ops::add(x, ops::mul(a, g));
}

struct Stack {
  std::vector<Tensor> w, b;
  explicit Stack(int layers, int64_t width) {
    for (int i = 0; i < layers; ++i) {
      w.push_back(uniform({width}, -1, 1, 100 + i, DType::f32).requires_grad(true));
      b.push_back(uniform({width}, -1, 1, 200 + i, DType::f32).requires_grad(true));
      w.back().storage()->set_kind(MemoryKind::parameter);  // as nn does for weights
      b.back().storage()->set_kind(MemoryKind::parameter);
    }
  }
  void zero() {
    for (auto& t : w) t.set_grad(Tensor());
    for (auto& t : b) t.set_grad(Tensor());
  }
  std::vector<std::vector<float>> grads() const {
    std::vector<std::vector<float>> g;
    for (const auto& t : w) g.push_back(t.grad().to_vector<float>());
    for (const auto& t : b) g.push_back(t.grad().to_vector<float>());
    return g;
  }
};

using Wrap = std::function<Tensor(int layer, std::function<Tensor()>)>;

std::vector<std::vector<float>> run(Stack& s, const Tensor& x, const Wrap& wrap) {
  s.zero();
  Tensor h = x;
  for (int i = 0; i < int(s.w.size()); ++i) {
    h = wrap(i, [&, i, in = h] { return block(in, s.w[size_t(i)], s.b[size_t(i)]); });
  }
  backward(ops::sum(ops::mul(h, h)));
  return s.grads();
}

Wrap plain() {
  return [](int, std::function<Tensor()> f) { return f(); };
}
Wrap with(const Policy& p) {
  return [p](int i, std::function<Tensor()> f) {
    return checkpoint("layers." + std::to_string(i), p, f);
  };
}

TEST(Checkpoint, EveryPolicyIsBitwiseEqualToNoCheckpointing) {
  Stack s(4, 257);
  Tensor x = uniform({3, 257}, -1, 1, 7, DType::f32).requires_grad(true);
  auto expected = run(s, x, plain());
  int64_t replays = recompute_stats().replays;
  for (const Policy& p :
       {policies::full(), policies::save_all(), policies::save_ops({"tanh"}),
        policies::save_every_nth("add", 2), policies::recompute_scopes("*"),
        policies::combine({policies::save_scopes("layers.1*"), policies::full()})}) {
    EXPECT_EQ(run(s, x, with(p)), expected) << p.name();
  }
  EXPECT_GT(recompute_stats().replays, replays);
}

// One region over a 24-block stack: about 200 tensors, past the size where a
// region looks its tensors up by hashing rather than by a scan. Under full
// checkpointing the forward leaves nothing but its output: every tensor a
// node read was known as the region's own.
TEST(Checkpoint, LargeRegionsAreBitwiseEqual) {
  Stack s(24, 33);
  Tensor x = uniform({2, 33}, -1, 1, 10, DType::f32).requires_grad(true);
  auto expected = run(s, x, plain());
  for (const Policy& p : {policies::full(), policies::save_every_nth("mul", 3)}) {
    s.zero();
    const int64_t before = memory_stats::snapshot().total.live;
    Tensor h = checkpoint("stack", p, [&] {
      Tensor y = x;
      for (size_t i = 0; i < s.w.size(); ++i) y = block(y, s.w[i], s.b[i]);
      return y;
    });
    const int64_t held = memory_stats::snapshot().total.live - before - int64_t(h.nbytes());
    if (p.name() == policies::full().name()) {
      EXPECT_EQ(held, 0);
    }
    backward(ops::sum(ops::mul(h, h)));
    EXPECT_EQ(s.grads(), expected) << p.name();
  }
}

TEST(Checkpoint, StatsCountReplaysAndTheirWallTime) {
  Stack s(3, 1 << 16);
  Tensor x = uniform({4, 1 << 16}, -1, 1, 9, DType::f32).requires_grad(true);
  RecomputeStats before = recompute_stats();
  run(s, x, plain());
  RecomputeStats plain_step = recompute_stats() - before;
  EXPECT_EQ(plain_step.regions, 0);
  EXPECT_EQ(plain_step.replay_seconds, 0.0);

  before = recompute_stats();
  const auto t0 = std::chrono::steady_clock::now();
  run(s, x, with(policies::full()));
  const double step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecomputeStats step = recompute_stats() - before;
  EXPECT_EQ(step.regions, 3);
  EXPECT_EQ(step.replays, 3);
  // Per block x * w, tanh, x + b and silu, whose outputs backward reads;
  // not the last mul and add.
  EXPECT_EQ(step.nodes_replayed, 3 * 4);
  EXPECT_GT(step.replay_seconds, 0.0);
  EXPECT_LT(step.replay_seconds, step_seconds);
}

TEST(Checkpoint, NestedRegionsAreBitwiseEqual) {
  Stack s(4, 65);
  Tensor x = uniform({2, 65}, -1, 1, 8, DType::f32).requires_grad(true);
  auto expected = run(s, x, plain());
  s.zero();
  Tensor h = checkpoint("outer", policies::full(), [&] {
    Tensor y = x;
    for (int i = 0; i < 4; ++i) {
      Policy inner = i % 2 ? policies::save_all() : policies::full();
      y = checkpoint(std::to_string(i), inner,
                     [&] { return block(y, s.w[size_t(i)], s.b[size_t(i)]); });
    }
    return y;
  });
  backward(ops::sum(ops::mul(h, h)));
  EXPECT_EQ(s.grads(), expected);
}

TEST(Checkpoint, InnerMustBeatsOuterPrefer) {
  const std::string scope = "a.router.gate", region = "a";
  TensorMeta meta{{2}, DType::f32, Device::cpu()};
  ValueInfo v{"linear", scope, region, 0, false, false, meta, 8, 16.0, 0};
  EXPECT_EQ(resolve({policies::save_scopes("*.router.*")(v), policies::full()(v)}),
            Decision::must_save);
  EXPECT_EQ(resolve({policies::full()(v), policies::save_scopes("*.router.*")(v)}),
            Decision::must_save);  // MUST beats PREFER from either side
  EXPECT_EQ(resolve({policies::save_all()(v), policies::full()(v)}), Decision::prefer_save);
  EXPECT_EQ(resolve({policies::recompute_scopes("a.*")(v), policies::save_scopes("*")(v)}),
            Decision::must_recompute);  // both MUST: the inner wins
  EXPECT_TRUE(glob_match("*.router.*", "layers.3.moe.router.gate"));
  EXPECT_FALSE(glob_match("*.router.*", "layers.3.moe.routers"));
  EXPECT_TRUE(glob_match("layers.?.attn", "layers.7.attn"));
}

// recompute_auxiliary forces only the named op's auxiliary outputs (the
// delta rule's chunk states, attention's logsumexp) to be recomputed, over
// a policy that saves the op; an op it does not know is an Error.
TEST(Checkpoint, RecomputeAuxiliaryDecidesOnlyTheOpsAuxiliaryOutputs) {
  const std::string scope = "layers.0.linear_attn", region = "layers.0";
  TensorMeta meta{{2}, DType::f32, Device::cpu()};
  const ValueInfo out{"gated_delta_rule", scope, region, 0, false, false, meta, 8, 16.0, 0};
  const ValueInfo states{"gated_delta_rule", scope, region, 2, true, false, meta, 8, 16.0, 0};
  const ValueInfo lse{"sdpa", scope, region, 1, true, false, meta, 8, 16.0, 0};
  const Policy lean = policies::recompute_auxiliary("gated_delta_rule");
  const Policy sac = policies::op_sac({"sdpa", "gated_delta_rule"});
  EXPECT_EQ(lean(out), std::nullopt);
  EXPECT_EQ(lean(lse), std::nullopt);
  EXPECT_EQ(lean(states), Decision::must_recompute);
  EXPECT_EQ(resolve({lean(states), sac(states)}), Decision::must_recompute);
  EXPECT_EQ(resolve({lean(out), sac(out)}), Decision::prefer_save);
  EXPECT_THROW(policies::recompute_auxiliary("gated_delta"), Error);
}

TEST(Checkpoint, FullCheckpointingKeepsOnlyRegionInputs) {
  const int layers = 16;
  const int64_t width = 4096;
  Stack s(layers, width);
  // Data: a leaf that required grad would be a parameter, not an activation.
  Tensor x = uniform({4, width}, -1, 1, 9, DType::f32);
  auto peak_saved = [&](const Wrap& wrap) {
    s.zero();
    memory_stats::reset_peaks();
    int64_t base = memory_stats::snapshot()[MemoryKind::saved_activation].live;
    Tensor h = x;
    for (int i = 0; i < layers; ++i) {
      h = wrap(i, [&, i, in = h] { return block(in, s.w[size_t(i)], s.b[size_t(i)]); });
    }
    int64_t peak = memory_stats::snapshot()[MemoryKind::saved_activation].peak - base;
    backward(ops::sum(ops::mul(h, h)));
    return peak;
  };
  const int64_t input_bytes = 4 * width * 4;
  int64_t none = peak_saved(plain());
  int64_t full = peak_saved(with(policies::full()));
  // Without checkpointing each block keeps several activations of its input's size.
  EXPECT_GE(none, layers * 4 * input_bytes);
  // Full: one input per block (plus the final sum's input), and one block's
  // activations while that block runs.
  EXPECT_LE(full, (layers + 1) * input_bytes + none / layers);
  EXPECT_LT(full, none / 3);
}

TEST(Checkpoint, NoiseMakesTheBitwiseVerifierFireAndNameTheNode) {
  Stack s(2, 33);
  Tensor x = uniform({2, 33}, -1, 1, 10, DType::f32).requires_grad(true);
  CheckpointOptions o{.verify = Verify::bitwise, .recompute_noise_ulps = 1};
  Tensor h = checkpoint(
      "layers.0", policies::full(), [&] { return block(x, s.w[0], s.b[0]); }, o);
  try {
    backward(ops::sum(h));
    FAIL() << "expected a verifier error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("recompute mismatch in region 'layers.0'"), std::string::npos) << m;
    EXPECT_NE(m.find("mul at 'layers.0'"), std::string::npos) << m;  // the first replayed node
    EXPECT_NE(m.find("max 1 ulp"), std::string::npos) << m;
  }
  // Without noise the same check passes, and report mode collects instead of raising.
  o.recompute_noise_ulps = 0;
  Tensor clean = checkpoint(
      "layers.0", policies::full(), [&] { return block(x, s.w[0], s.b[0]); }, o);
  EXPECT_NO_THROW(backward(ops::sum(clean)));
  o.recompute_noise_ulps = 1;
  o.on_mismatch = OnMismatch::report;
  Tensor noisy = checkpoint(
      "layers.0", policies::full(), [&] { return block(x, s.w[0], s.b[0]); }, o);
  backward(ops::sum(noisy));
  std::vector<Mismatch> found = take_mismatches();
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].region, "layers.0");
  EXPECT_GT(found[0].differing, 0);
}

TEST(Checkpoint, RetainGraphReplaysOncePerBackward) {
  Stack s(1, 17);
  Tensor x = uniform({17}, -1, 1, 11, DType::f32).requires_grad(true);
  Tensor h = checkpoint("r", policies::full(), [&] { return block(x, s.w[0], s.b[0]); });
  Tensor loss = ops::sum(ops::mul(h, h));
  int64_t before = recompute_stats().replays;
  backward(loss, {}, {.retain_graph = true});
  std::vector<float> first = s.w[0].grad().to_vector<float>();
  backward(loss);
  EXPECT_EQ(recompute_stats().replays - before, 2);
  std::vector<float> twice = s.w[0].grad().to_vector<float>();
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(twice[i], first[i] + first[i]);
}

TEST(Checkpoint, RegionInputsWithoutGradNoGradInsideAndErrors) {
  Stack s(1, 9);
  Tensor x = uniform({9}, -1, 1, 12, DType::f32);  // needs no grad
  Tensor h = checkpoint("r", policies::full(), [&] {
    Tensor c;
    {
      NoGradGuard no_grad;
      c = ops::exp(x);  // not recorded: held as a region input
    }
    return block(c, s.w[0], s.b[0]);
  });
  backward(ops::sum(h));
  EXPECT_TRUE(s.w[0].grad().defined());

  // A region input modified in place before backward: replay refuses it.
  Tensor y = uniform({9}, -1, 1, 13, DType::f32);
  Tensor out = checkpoint("layers.5", policies::full(), [&] { return block(y, s.w[0], s.b[0]); });
  y.fill_(0.5);
  try {
    backward(ops::sum(out));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("modified in place"), std::string::npos) << m;
  }
  // An error inside the region names it.
  try {
    checkpoint("layers.6", policies::full(), [&] { return ops::add(y, Tensor::zeros({4})); });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint region 'layers.6'"), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, InPlaceWriteInsideARegionIsAClearError) {
  Stack s(1, 9);
  Tensor y = uniform({9}, -1, 1, 14, DType::f32);
  Tensor out = checkpoint("layers.7", policies::full(), [&] {
    Tensor first = ops::mul(y, s.w[0]);  // saves y
    y.fill_(2.0);                        // then y changes under it
    return ops::add(first, ops::mul(y, s.b[0]));
  });
  try {
    backward(ops::sum(out));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, BitwiseVerifierHandlesViewOutputs) {
  Tensor x = uniform({3, 4}, -1, 1, 15, DType::f32).requires_grad(true);
  CheckpointOptions o{.verify = Verify::bitwise};
  // transpose records a non-contiguous output that requires grad.
  Tensor h = checkpoint(
      "v", policies::full(), [&] { return ops::tanh(ops::transpose(x, 0, 1)); }, o);
  EXPECT_NO_THROW(backward(ops::sum(ops::mul(h, h))));
  EXPECT_TRUE(x.grad().defined());
}

TEST(Checkpoint, GradcheckThroughARegion) {
  Tensor w = testing::param({5}, 3);
  Tensor b = testing::param({5}, 4);
  Tensor x = testing::param({2, 5}, 5);
  EXPECT_TRUE(testing::gradcheck(
      [](const testing::Inputs& in) {
        return checkpoint("g", policies::full(), [&] { return block(in[0], in[1], in[2]); });
      },
      {x, w, b}));
}

}  // namespace
}  // namespace reprise::autograd
