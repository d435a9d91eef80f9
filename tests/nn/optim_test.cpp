// nn/optim: AdamW and SGD against hand-computed steps, gradient clipping,
// the cosine schedule, and optimizer state export/import.
#include "nn/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "engine/memory_stats.h"
#include "ops/shape.h"
#include "tests/support/expect_error.h"

namespace reprise::nn {
namespace {

NamedParameter param(std::string name, std::vector<float> values, bool decay = true) {
  Shape shape{int64_t(values.size())};
  Tensor t = Tensor::from_vector(values, shape);
  t.requires_grad(true);
  return {std::move(name), t, decay};
}

void set_grad(const NamedParameter& p, std::vector<float> g) {
  Tensor t = p.value;
  t.set_grad(Tensor::from_vector(g, p.value.shape()));
}

std::vector<float> values(const NamedParameter& p) { return p.value.to_vector<float>(); }

void expect_near(const std::vector<float>& a, const std::vector<double>& e, double tol = 1e-6) {
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], tol) << "element " << i;
}

TEST(AdamW, FirstStepMovesEachWeightByLrAgainstItsGradientSign) {
  // Step 1: m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps).
  NamedParameter w = param("w", {1.0f, -2.0f}), n = param("norm", {3.0f}, /*decay=*/false);
  AdamW opt({w, n}, {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1});
  set_grad(w, {0.5f, -1.0f});
  set_grad(n, {0.25f});
  opt.step();
  expect_near(values(w), {1.0 * (1 - 0.01) - 0.1, -2.0 * (1 - 0.01) + 0.1});  // decayed
  expect_near(values(n), {3.0 - 0.1});                                        // not decayed
  EXPECT_EQ(opt.steps(), 1);
}

TEST(AdamW, SecondStepFollowsTheBiasCorrectedMoments) {
  const double lr = 0.05, b1 = 0.8, b2 = 0.9, eps = 1e-3, wd = 0.2;
  NamedParameter w = param("w", {1.5f});
  AdamW opt({w}, {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd});
  const double g1 = 0.3, g2 = -0.7;
  set_grad(w, {float(g1)});
  opt.step();
  set_grad(w, {float(g2)});
  opt.step();
  // By hand, in f64.
  double p = 1.5, m = 0, v = 0;
  for (int t = 1; t <= 2; ++t) {
    const double g = t == 1 ? g1 : g2;
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double mh = m / (1 - std::pow(b1, t)), vh = v / (1 - std::pow(b2, t));
    p -= lr * mh / (std::sqrt(vh) + eps);
  }
  expect_near(values(w), {p});
  auto state = opt.state();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].first, "w.exp_avg");
  EXPECT_NEAR(state[0].second.item<float>(), m, 1e-7);
  EXPECT_EQ(state[1].first, "w.exp_avg_sq");
  EXPECT_NEAR(state[1].second.item<float>(), v, 1e-7);
  EXPECT_EQ(state[3].first, "step");
  EXPECT_EQ(state[3].second.item<int64_t>(), 2);
}

TEST(AdamW, DecayAllDecaysNormsAndEmbeddingsToo) {
  NamedParameter n = param("norm", {3.0f}, /*decay=*/false);
  AdamW opt({n}, {.lr = 0.1, .weight_decay = 0.1, .decay_all = true});
  set_grad(n, {1.0f});
  opt.step();
  expect_near(values(n), {3.0 * 0.99 - 0.1});
}

TEST(AdamW, ParametersWithoutGradientsKeepTheirStateStill) {
  NamedParameter a = param("a", {1.0f}), b = param("b", {2.0f});
  AdamW opt({a, b}, {.lr = 0.1});
  set_grad(a, {1.0f});
  opt.step();
  EXPECT_EQ(values(b), std::vector<float>{2.0f});
  std::map<std::string, Tensor> s;
  for (auto& [k, t] : opt.state()) s[k] = t;
  EXPECT_EQ(s["a.step"].item<int64_t>(), 1);
  EXPECT_EQ(s["b.step"].item<int64_t>(), 0);
  EXPECT_EQ(s["b.exp_avg"].item<float>(), 0.0f);
}

// Rank 0 of 2 alone, with a stand-in all-gather whose rank 1 sends 7s: it
// keeps state for its block, updates those elements as an unsharded AdamW
// does, and takes the rest from rank 1.
TEST(AdamW, AShardKeepsAndUpdatesOnlyItsBlock) {
  auto make = [] {
    return std::vector<NamedParameter>{param("a", {0.1f, 0.2f, -0.3f, 0.4f}), param("b", {4.0f}),
                                       param("c", {1.0f, 2.0f}), param("e", {5.0f}, false)};
  };
  std::vector<NamedParameter> sharded = make(), plain = make();
  // "e" is this process's own (an expert); a, b, c are shared, in one
  // bucket in reverse order: c at 0, b at 2, a at 3, in blocks of 4. Rank
  // 0 holds c, b and a[0]; rank 1 a[1..4).
  const ShardLayout layout =
      ShardLayout::build({sharded[0], sharded[1], sharded[2]}, 1 << 20, 2, 1);
  ASSERT_EQ(layout.buckets.size(), size_t(1));
  ASSERT_EQ(layout.buckets[0].block, 4);
  int gathers = 0;
  const OptimizerShard shard{.layout = layout, .rank = 0, .all_gather = [&](const Tensor& block) {
                               ++gathers;
                               return ops::stack({block, Tensor::full({4}, 7.0)}, 0);  // (2, 4)
                             }};
  const int64_t before = memory_stats::snapshot()[MemoryKind::optimizer_state].live;
  AdamW a(sharded, {.lr = 0.01}, shard);
  // Two moments of its block (4 floats) and of e (1 float).
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::optimizer_state].live - before, 2 * 5 * 4);
  EXPECT_EQ(a.kept_elements(), 5);
  AdamW b(plain, {.lr = 0.01});
  set_grad(plain[0], {0.5f, -0.25f, 1.0f, 2.0f});
  set_grad(plain[1], {1.0f});
  set_grad(plain[2], {-1.0f, 3.0f});
  set_grad(plain[3], {0.75f});
  set_grad(sharded[3], {0.75f});
  // Its block of the gradients: c, b, a[0].
  const ShardGradients grads{.blocks = {Tensor::from_vector<float>({-1.0f, 3.0f, 1.0f, 0.5f}, {4})},
                             .present = {true, true, true}};
  testing::expect_error([&] { a.step(); }, {"AdamW::step", "gradient blocks"});
  a.step(grads);
  b.step();
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(values(sharded[0])[0], values(plain[0])[0]);
  EXPECT_EQ(values(sharded[0]), (std::vector<float>{values(plain[0])[0], 7.0f, 7.0f, 7.0f}));
  EXPECT_EQ(values(sharded[1]), values(plain[1]));
  EXPECT_EQ(values(sharded[2]), values(plain[2]));
  EXPECT_EQ(values(sharded[3]), values(plain[3]));
  // load_state takes the whole state and keeps its part; state() gathers
  // it (rank 1's moments are the stand-in's 7s).
  std::map<std::string, Tensor> whole;
  for (auto& [k, t] : b.state()) whole[k] = t;
  a.load_state(whole);
  EXPECT_EQ(a.steps(), 1);
  const auto state = a.state();
  EXPECT_EQ(state[0].first, "a.exp_avg");
  const std::vector<float> avg = state[0].second.to_vector<float>();
  EXPECT_EQ(avg[0], whole["a.exp_avg"].to_vector<float>()[0]);
  EXPECT_EQ(avg[1], 7.0f);
}

TEST(AdamW, StateIsOptimizerMemoryAndRoundTripsBitwise) {
  const int64_t before = memory_stats::snapshot()[MemoryKind::optimizer_state].live;
  auto make = [] {
    return std::vector<NamedParameter>{param("x", {0.1f, 0.2f, -0.3f}), param("y", {4.0f}, false)};
  };
  std::vector<NamedParameter> p = make(), q = make();
  auto grads = [](const std::vector<NamedParameter>& ps, int step) {
    set_grad(ps[0], {0.5f * float(step), -0.25f, 1.0f / float(step + 1)});
    set_grad(ps[1], {float(step) - 1.5f});
  };
  {
    AdamW a(p, {.lr = 0.01});
    EXPECT_EQ(memory_stats::snapshot()[MemoryKind::optimizer_state].live - before, 2 * 4 * 4);
    for (int s = 0; s < 3; ++s) grads(p, s), a.step();
    // A second optimizer on copies of the weights resumes from the exported state.
    for (size_t i = 0; i < p.size(); ++i) q[i].value.detach().copy_(p[i].value.detach());
    AdamW b(q, {.lr = 0.01});
    std::map<std::string, Tensor> s;
    for (auto& [k, t] : a.state()) s[k] = t;
    b.load_state(s);
    EXPECT_EQ(b.steps(), 3);
    for (int k = 3; k < 6; ++k) grads(p, k), a.step(), grads(q, k), b.step();
    for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(values(p[i]), values(q[i]));

    auto broken = s;
    broken.erase("x.exp_avg_sq");
    EXPECT_THROW(b.load_state(broken), Error);
    broken = s;
    broken["x.exp_avg"] = Tensor::zeros({2});
    EXPECT_THROW(b.load_state(broken), Error);
    broken = s;
    broken["z.exp_avg"] = Tensor::zeros({1});
    try {
      b.load_state(broken);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unexpected tensor 'z.exp_avg'"), std::string::npos);
    }
    broken = s;
    broken["step"] = Tensor::from_vector<int64_t>({-1}, {});
    EXPECT_THROW(b.load_state(broken), Error);
    // A failed load changes nothing.
    EXPECT_EQ(b.steps(), 6);
  }
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::optimizer_state].live, before);
}

TEST(SGD, MomentumDampeningNesterovAndWeightDecayByHand) {
  {
    NamedParameter w = param("w", {1.0f, 2.0f});
    SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
    set_grad(w, {1.0f, -1.0f});
    opt.step();  // b = g
    expect_near(values(w), {0.9, 2.1});
    set_grad(w, {0.5f, 0.5f});
    opt.step();  // b = 0.9 [1, -1] + [0.5, 0.5] = [1.4, -0.4]
    expect_near(values(w), {0.76, 2.14});
    EXPECT_EQ(opt.state().front().first, "w.momentum_buffer");
    expect_near(opt.state().front().second.to_vector<float>(), {1.4, -0.4});
  }
  {
    NamedParameter w = param("w", {1.0f, 2.0f});
    SGD opt({w}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    set_grad(w, {1.0f, -1.0f});
    opt.step();
    set_grad(w, {0.5f, 0.5f});
    opt.step();  // b = 0.9 [1, -1] + 0.5 [0.5, 0.5] = [1.15, -0.65]
    expect_near(values(w), {0.9 - 0.115, 2.1 + 0.065});
  }
  {
    NamedParameter w = param("w", {1.0f, 2.0f});
    SGD opt({w}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
    set_grad(w, {1.0f, -1.0f});
    opt.step();  // b = g, step g + 0.9 b = 1.9 g
    expect_near(values(w), {0.81, 2.19});
  }
  {
    NamedParameter w = param("w", {1.0f, 2.0f});
    SGD opt({w}, {.lr = 0.1, .weight_decay = 0.1});
    set_grad(w, {1.0f, -1.0f});
    opt.step();  // g + 0.1 w = [1.1, -0.8]
    expect_near(values(w), {0.89, 2.08});
    EXPECT_EQ(opt.state().size(), 1u);  // no momentum buffers, only the step
  }
  EXPECT_THROW(SGD({param("w", {1.0f})}, {.nesterov = true}), Error);
}

TEST(SGD, StateRoundTripsBitwise) {
  NamedParameter a = param("a", {1.0f, -1.0f}), b = param("a", {1.0f, -1.0f});
  SGD x({a}, {.lr = 0.1, .momentum = 0.5}), y({b}, {.lr = 0.1, .momentum = 0.5});
  set_grad(a, {0.3f, 0.7f});
  x.step();
  b.value.detach().copy_(a.value.detach());
  std::map<std::string, Tensor> s;
  for (auto& [k, t] : x.state()) s[k] = t;
  y.load_state(s);
  set_grad(a, {-0.2f, 0.1f});
  set_grad(b, {-0.2f, 0.1f});
  x.step();
  y.step();
  EXPECT_EQ(values(a), values(b));
  s["a.momentum_buffer"] = Tensor::zeros({3});
  EXPECT_THROW(y.load_state(s), Error);
}

TEST(ClipGradNorm, ReturnsTheGlobalNormAndScalesOnlyAboveTheMax) {
  NamedParameter a = param("a", {0, 0}), b = param("b", {0}), none = param("none", {5});
  set_grad(a, {3.0f, 4.0f});
  set_grad(b, {12.0f});
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b, none}, 20.0), 13.0);
  EXPECT_EQ(a.value.grad().to_vector<float>(), (std::vector<float>{3.0f, 4.0f}));  // untouched
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b, none}, 6.5), 13.0);
  const double c = 6.5 / (13.0 + 1e-6);
  expect_near(a.value.grad().to_vector<float>(), {3 * c, 4 * c});
  expect_near(b.value.grad().to_vector<float>(), {12 * c});
  EXPECT_FALSE(none.value.grad().defined());
  EXPECT_THROW(clip_grad_norm({a}, -1.0), Error);
}

TEST(ClipGradNorm, LongGradientsSumInAFixedOrder) {
  // 10007 elements: several chunks and a ragged tail; the f64 sum of squares
  // of 1s and 2s is exact, so the norm is too.
  std::vector<float> g(10007);
  for (size_t i = 0; i < g.size(); ++i) g[i] = i % 2 ? 2.0f : 1.0f;
  NamedParameter p = param("p", std::vector<float>(g.size(), 0.0f));
  set_grad(p, g);
  EXPECT_DOUBLE_EQ(clip_grad_norm({p}, 1e9), std::sqrt(5004.0 * 1 + 5003.0 * 4));
}

TEST(CosineSchedule, WarmsUpLinearlyThenDecaysToTheMinimum) {
  CosineSchedule s{.max_lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .total_steps = 110};
  EXPECT_DOUBLE_EQ(s.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(4), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(9), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(10), 1.0);
  EXPECT_NEAR(s.lr(60), 0.55, 1e-12);  // halfway through the decay
  EXPECT_NEAR(s.lr(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4)), 1e-12);
  EXPECT_DOUBLE_EQ(s.lr(110), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(100000), 0.1);
  CosineSchedule flat{.max_lr = 2.0, .min_lr = 2.0, .warmup_steps = 0, .total_steps = 5};
  for (int64_t t = 0; t < 8; ++t) EXPECT_DOUBLE_EQ(flat.lr(t), 2.0);
}

}  // namespace
}  // namespace reprise::nn
