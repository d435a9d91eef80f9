// The tape and backward engine: accumulation, retain_graph, grad(), grad
// mode, version checks, scopes and release of saved tensors.
#include "autograd/backward.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/scope.h"
#include "autograd/tape.h"
#include "engine/accumulate.h"
#include "engine/memory_stats.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"

namespace reprise::autograd {
namespace {

Tensor leaf(std::vector<double> v) {
  Shape s{int64_t(v.size())};
  return Tensor::from_vector(v, s).requires_grad(true);
}

TEST(Backward, AccumulatesOverUsesAndCalls) {
  Tensor x = leaf({1, 2, 3});
  // y = sum(x * x + x): dy/dx = 2x + 1
  Tensor y = ops::sum(ops::add(ops::mul(x, x), x));
  backward(y);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 5, 7}));
  backward(ops::sum(x));  // a second graph adds to .grad
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 6, 8}));
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::gradient].live, 0 + int64_t(x.grad().nbytes()));
}

TEST(Backward, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({0.5, 1.5});
  Tensor y = ops::sum(ops::exp(x));
  backward(y, {}, {.retain_graph = true});
  backward(y);  // allowed: the first call kept the saved tensors
  std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_DOUBLE_EQ(g[0], 2 * std::exp(0.5));
  try {
    backward(y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Backward, GradReturnsChosenInputsOnly) {
  Tensor a = leaf({1, 2});
  Tensor b = leaf({3, 4});
  Tensor h = ops::mul(a, b);  // non-leaf input
  Tensor y = ops::sum(ops::mul(h, h));
  Tensors g = grad({y}, {a, h});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2 * 3 * 3 * 1, 2 * 4 * 4 * 2}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{2 * 3, 2 * 8}));
  EXPECT_FALSE(a.grad().defined());  // grad() leaves .grad alone
  EXPECT_FALSE(b.grad().defined());
  Tensor unused = leaf({1});
  EXPECT_THROW(grad({ops::sum(ops::exp(a))}, {unused}), Error);
  EXPECT_FALSE(grad({ops::sum(ops::exp(a))}, {unused}, {}, {}, true)[0].defined());
}

// A given seed gradient enters the graph uncopied; the results must be
// what a copy would give, the caller's seed must never be written, and
// nothing handed back may share its memory: not .grad (which optimizers
// update in place), not a result of grad() that the seed reaches unchanged.
TEST(Backward, SeedGradientIsNeitherWrittenNorAliased) {
  const std::vector<double> seed_values{0.5, -2, 3};
  Tensor seed = Tensor::from_vector(seed_values, {3});
  Tensor x = leaf({1, 2, 3});

  backward(ops::add(x, 1.0), seed);  // the seed reaches x's AccumulateGrad as it is
  EXPECT_EQ(x.grad().to_vector<double>(), seed_values);
  EXPECT_NE(x.grad().storage(), seed.storage());
  Tensor x_grad = x.grad();
  accumulate_(x_grad, Tensor::ones({3}, DType::f64));  // as an optimizer would
  backward(ops::mul(x, 2.0), seed);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2.5, -5, 10}));

  Tensor g_add = grad({ops::add(x, 1.0)}, {x}, {seed})[0];
  // reshape's backward hands on a view of the seed (here itself a view).
  Tensor g_view = grad({ops::reshape(x, {1, 3})}, {x}, {seed.reshape({1, 3})})[0];
  EXPECT_EQ(g_add.to_vector<double>(), seed_values);
  EXPECT_EQ(g_view.to_vector<double>(), seed_values);
  EXPECT_NE(g_add.storage(), seed.storage());
  EXPECT_NE(g_view.storage(), seed.storage());
  EXPECT_EQ(seed.to_vector<double>(), seed_values);

  // A seed that itself requires grad is only read: nothing is recorded on it.
  Tensor w = leaf({1, 1, 1});
  Tensor seed_w = ops::mul(w, 2.0);
  Tensors gx = grad({ops::mul(x, x)}, {x}, {seed_w});
  EXPECT_EQ(gx[0].to_vector<double>(), (std::vector<double>{4, 8, 12}));
  EXPECT_FALSE(gx[0].requires_grad());
  EXPECT_EQ(seed_w.to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

TEST(Backward, NoGradRecordsNothing) {
  Tensor x = leaf({1, 2});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ops::exp(x);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(backward(ops::sum(y)), Error);
}

TEST(Backward, ModifiedSavedTensorIsAnError) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  Tensor w = leaf({3, 4});
  Tensor y = ops::sum(ops::mul(x, w));  // saves x for dw
  x.fill_(0);                           // x does not require grad: allowed, bumps its version
  try {
    backward(y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("mul"), std::string::npos) << m;
    EXPECT_NE(m.find("modified in place"), std::string::npos) << m;
  }
}

TEST(Backward, LayoutViewOnGradTensorPointsToOps) {
  Tensor x = leaf({1, 2, 3, 4});
  EXPECT_THROW(x.view({2, 2}), Error);
  Tensor y = ops::reshape(x, {2, 2});  // the recorded version works
  backward(ops::sum(ops::transpose(y, 0, 1)));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 1}));
}

TEST(Tape, NodesCarryScopeAndSequenceAndFreeSavedTensors) {
  struct Collect : TapeObserver {
    std::vector<std::shared_ptr<Node>> nodes;
    void on_record(const std::shared_ptr<Node>& n, const Tensors&, const Tensors&) override {
      nodes.push_back(n);
    }
  } seen;
  Tensor x = leaf({1, 2, 3});
  int64_t saved_before = memory_stats::snapshot()[MemoryKind::saved_activation].live;
  Tensor y;
  {
    ObserveTape observe(seen);
    Scope layers("layers");
    Scope three("3");
    Tensor h = ops::exp(x);  // saves its output
    {
      Scope mlp("mlp");
      y = ops::sum(ops::mul(h, h));
    }
  }
  ASSERT_EQ(seen.nodes.size(), 3u);
  EXPECT_EQ(seen.nodes[0]->scope(), "layers.3");
  EXPECT_STREQ(seen.nodes[0]->name(), "exp");
  EXPECT_EQ(seen.nodes[1]->scope(), "layers.3.mlp");
  EXPECT_LT(seen.nodes[0]->sequence_nr(), seen.nodes[1]->sequence_nr());
  EXPECT_GT(memory_stats::snapshot()[MemoryKind::saved_activation].live, saved_before);
  backward(y);
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::saved_activation].live, saved_before);
  EXPECT_TRUE(seen.nodes[0]->released());
}

// A weight the user made (a leaf that requires grad) is a parameter from
// the moment it is marked, and stays one when an op saves it, never a
// saved activation; what ops produce and save is.
TEST(Tape, SavedLeavesThatRequireGradAreParametersNotActivations) {
  const auto live = [](MemoryKind k) { return memory_stats::snapshot()[k].live; };
  const int64_t params = live(MemoryKind::parameter);
  Tensor w = leaf({1, 2, 3, 4});  // 32 bytes, made like torch.randn(...).requires_grad_()
  EXPECT_EQ(live(MemoryKind::parameter) - params, 32);
  const int64_t saved = live(MemoryKind::saved_activation);
  Tensor y = ops::exp(ops::mul(w, w));  // mul saves w, exp its output
  EXPECT_EQ(live(MemoryKind::saved_activation) - saved, 32);
  EXPECT_EQ(live(MemoryKind::parameter) - params, 32);
  backward(ops::sum(y));
  EXPECT_EQ(live(MemoryKind::saved_activation), saved);
  EXPECT_EQ(live(MemoryKind::parameter) - params, 32);  // w stays a parameter
}

// A copy of a weight made from it alone (autocast's bf16 cast of a
// transpose) is a parameter too when an op saves it; a value made from
// weights and data (an embedding's rows of the token ids, and what follows)
// is an activation.
TEST(Tape, SavedCopiesOfWeightsAreParametersNotActivations) {
  const auto live = [](MemoryKind k) { return memory_stats::snapshot()[k].live; };
  Tensor table = Tensor::full({5, 8}, 0.25).requires_grad(true);
  Tensor w = Tensor::full({4, 8}, 0.5).requires_grad(true);
  Tensor ids = Tensor::from_vector<int64_t>({0, 2, 4}, {3});
  const int64_t saved = live(MemoryKind::saved_activation);
  const int64_t params = live(MemoryKind::parameter);
  Tensor x = ops::embedding(table, ids);  // (3, 8) f32; saves the ids, 24 bytes
  Tensor w16 = ops::cast(ops::transpose(w, 0, 1), DType::bf16);  // (8, 4) bf16: 64 bytes
  Tensor y = ops::matmul(ops::cast(x, DType::bf16), w16);        // saves both operands
  EXPECT_EQ(live(MemoryKind::parameter) - params, 64);
  EXPECT_EQ(live(MemoryKind::saved_activation) - saved, 24 + 48);  // the ids, the bf16 x
  backward(ops::sum(ops::cast(y, DType::f32)));
  EXPECT_EQ(live(MemoryKind::saved_activation), saved);
}

TEST(Backward, RepeatedRunsAreBitwiseEqual) {
  auto run = [] {
    Tensor x = Tensor::from_vector<double>({0.1, -0.7, 2.5, 0.3}, {2, 2}).requires_grad(true);
    Tensor y = ops::sum(ops::tanh(ops::mul(ops::add(x, x), ops::sigmoid(x))));
    backward(y);
    return x.grad().to_vector<double>();
  };
  EXPECT_EQ(run(), run());
}

// GradReadyHooks nest: every live one hears of each finished leaf
// gradient, the innermost first, and a hook that ends stops hearing.
TEST(Backward, EveryLiveGradReadyHookIsToldInnermostFirst) {
  Tensor a = Tensor::full({2}, 1.0).requires_grad(true);
  Tensor b = Tensor::full({2}, 2.0).requires_grad(true);
  std::vector<std::string> heard;
  auto name = [&](const Tensor& leaf) { return leaf.is_same(a) ? std::string("a") : "b"; };
  GradReadyHook outer([&](const Tensor& leaf) { heard.push_back("outer " + name(leaf)); });
  {
    GradReadyHook inner([&](const Tensor& leaf) { heard.push_back("inner " + name(leaf)); });
    backward(ops::sum(ops::mul(a, b)));
  }
  const std::vector<std::string> both{"inner a", "outer a", "inner b", "outer b"};
  const std::vector<std::string> swapped{"inner b", "outer b", "inner a", "outer a"};
  EXPECT_TRUE(heard == both || heard == swapped) << ::testing::PrintToString(heard);
  heard.clear();
  a.set_grad(Tensor());
  b.set_grad(Tensor());
  backward(ops::sum(ops::mul(a, b)));
  EXPECT_EQ(heard.size(), size_t(2));
  for (const std::string& h : heard) EXPECT_EQ(h.rfind("outer ", 0), size_t(0)) << h;
}

}  // namespace
}  // namespace reprise::autograd
