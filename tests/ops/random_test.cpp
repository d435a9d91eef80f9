// Random ops (dropout's cases, the mask replayed from one reservation, are
// in tests/cases/random.cpp): the node keeping only that reservation, replay after the stream
// advanced, thread-count independence, and the initialisers' distributions.
#include "ops/random.h"

#include <algorithm>
#include <cmath>

#include "autograd/backward.h"
#include "engine/threads.h"
#include "ops/reduce.h"
#include "ops/views.h"
#include "rng/distributions.h"
#include "rng/philox.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

TEST(RandomOps, DropoutNodeKeepsOnlyTheReservation) {
  rng::Generator gen(7);
  Tensor x = param({64, 33}, 1, 0.5, 1.5);
  Tensor y = ops::dropout(x, 0.25, gen);
  const auto& node = y.grad_fn();
  ASSERT_TRUE(node);
  EXPECT_TRUE(node->op().is_random);
  EXPECT_TRUE(node->saved.empty());
  ASSERT_TRUE(node->rng.has_value());
  EXPECT_EQ(node->rng->offset, 0u);
  EXPECT_EQ(node->rng->count, uint64_t(64 * 33 + 3) / 4 * 4);
  EXPECT_EQ(node->rng->subsequence, rng::Generator::subsequence_of("dropout"));

  // dx = mask / (1 - p): exactly y / x where kept, 0 where dropped.
  autograd::backward(ops::sum(y));
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(),
                            gv = x.grad().to_vector<double>();
  int64_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    ASSERT_EQ(gv[i], yv[i] == 0 ? 0.0 : 1.0 / 0.75) << i;
    ASSERT_TRUE(yv[i] == 0 || yv[i] == xv[i] * (1.0 / 0.75)) << i;
    kept += yv[i] != 0;
  }
  EXPECT_NEAR(double(kept) / double(xv.size()), 0.75, 0.04);
}

TEST(RandomOps, ReplayAfterTheStreamAdvanced) {
  rng::Generator gen(2026);
  Tensor x = param({1000}, 2);
  Tensor y = ops::dropout(x, 0.5, gen);
  // Other random ops move the streams on...
  Tensor other = ops::dropout(x, 0.5, gen);
  ops::randn({77}, gen);
  EXPECT_NE(y.to_vector<double>(), other.to_vector<double>());
  // ...and the recorded reservation still reproduces the output.
  const auto& node = y.grad_fn();
  const autograd::Tensors again = node->forward({x}, &*node->rng);
  EXPECT_EQ(again.at(0).to_vector<double>(), y.to_vector<double>());
}

TEST(RandomOps, EvaluationAndZeroProbabilityAreTheIdentity) {
  rng::Generator gen(1);
  Tensor x = param({10}, 3);
  EXPECT_TRUE(ops::dropout(x, 0.5, gen, /*training=*/false).is_same(x));
  EXPECT_TRUE(ops::dropout(x, 0.0, gen).is_same(x));
  EXPECT_EQ(gen.offset("dropout"), 0u);
  EXPECT_THROW(ops::dropout(x, 1.5, gen), Error);
  EXPECT_THROW(ops::dropout(Tensor::zeros({3}, DType::i64), 0.5, gen), Error);
}

// rand/randn/bernoulli element i is the documented function of word i of
// the stream (f32 uniforms: word offset + i).
TEST(RandomOps, CreationOpsReadTheirReservation) {
  rng::Generator gen(99);
  gen.reserve("default", 8);  // the next reservation starts at word 8
  const std::vector<float> u = ops::rand({5, 7}, gen).to_vector<float>();
  for (size_t i = 0; i < u.size(); ++i) {
    ASSERT_EQ(u[i], rng::uniform_float(rng::stream_word(99, 0, 8 + i))) << i;
  }
  EXPECT_EQ(gen.offset("default"), 8u + 36u);  // 35 words rounded to a block
  const std::vector<double> b =
      ops::bernoulli({1000}, 0.3, gen, "masks", DType::f64).to_vector<double>();
  const uint64_t sub = rng::Generator::subsequence_of("masks");
  for (size_t i = 0; i < b.size(); ++i) {
    ASSERT_EQ(b[i], rng::bernoulli(rng::stream_word(99, sub, i), rng::bernoulli_threshold(0.3))
                        ? 1.0
                        : 0.0);
  }
  EXPECT_EQ(ops::randn({3, 3}, gen, "default", DType::f64).dtype(), DType::f64);
  EXPECT_THROW(ops::rand({2}, gen, "default", DType::i32), Error);
}

TEST(RandomOps, IdenticalAtOneAndTwoThreads) {
  const int saved = threads::num_threads();
  auto run = [](int n) {
    threads::set_num_threads(n);
    rng::Generator gen(5);
    Tensor x = Tensor::ones({300, 301});
    return std::make_tuple(ops::randn({300, 301}, gen).to_vector<float>(),
                           ops::rand({300, 301}, gen, "default", DType::f64).to_vector<double>(),
                           ops::dropout(x, 0.1, gen).to_vector<float>());
  };
  const auto one = run(1);
  const auto two = run(2);
  threads::set_num_threads(saved);
  EXPECT_TRUE(one == two);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}
double variance(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size());
}

constexpr int64_t kN = 1 << 16;  // standard error of a mean of unit variance: 0.004

TEST(RandomInit, NormalAndUniform) {
  rng::Generator gen(11);
  Tensor w = Tensor::empty({kN});
  ops::normal_(w, 2.0, 0.5, gen);
  const std::vector<double> v = w.to_vector<double>();
  EXPECT_NEAR(mean(v), 2.0, 5 * 0.5 / std::sqrt(double(kN)));
  EXPECT_NEAR(variance(v), 0.25, 5 * 0.25 * std::sqrt(2.0 / kN));

  ops::uniform_(w, -3.0, 1.0, gen);
  const std::vector<double> u = w.to_vector<double>();
  EXPECT_GE(*std::min_element(u.begin(), u.end()), -3.0);
  EXPECT_LE(*std::max_element(u.begin(), u.end()), 1.0);
  EXPECT_NEAR(mean(u), -1.0, 5 * std::sqrt(16.0 / 12 / kN));
  EXPECT_NEAR(variance(u), 16.0 / 12, 5 * (16.0 / 12) * std::sqrt(0.8 / kN));
}

// Kolmogorov-Smirnov against the truncated normal CDF checks the quantile
// inversion over the whole range; the 0.1% critical value is 1.95 / sqrt(n).
TEST(RandomInit, TruncNormalFollowsTheTruncatedDistribution) {
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  struct Case {
    double mean, std, a, b;
  };
  for (const Case& c :
       {Case{0, 1, -2, 2}, Case{1, 2, 0, 3}, Case{0, 1, 2.5, 6}, Case{0, 0.02, -0.04, 0.04}}) {
    rng::Generator gen(13);
    Tensor w = Tensor::empty({kN}, DType::f64);
    ops::trunc_normal_(w, c.mean, c.std, c.a, c.b, gen);
    std::vector<double> v = w.to_vector<double>();
    std::sort(v.begin(), v.end());
    ASSERT_GE(v.front(), c.a);
    ASSERT_LE(v.back(), c.b);
    const double lo = phi((c.a - c.mean) / c.std), hi = phi((c.b - c.mean) / c.std);
    double d = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double f = (phi((v[i] - c.mean) / c.std) - lo) / (hi - lo);
      d = std::max({d, f - double(i) / kN, double(i + 1) / kN - f});
    }
    EXPECT_LT(d, 1.95 / std::sqrt(double(kN)))
        << c.mean << " " << c.std << " [" << c.a << ", " << c.b << "]";
  }
  rng::Generator gen(1);
  Tensor w = Tensor::empty({4});
  EXPECT_THROW(ops::trunc_normal_(w, 0, 1, 1, 1, gen), Error);
  EXPECT_THROW(ops::trunc_normal_(w, 0, 1, -INFINITY, 1, gen), Error);
}

TEST(RandomInit, KaimingUniformBoundIsLinearsDefault) {
  rng::Generator gen(17);
  Tensor w = param({64, 300}, 4);  // a leaf that requires grad: filled under no-grad
  ops::kaiming_uniform_(w, std::sqrt(5.0), gen);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  const std::vector<double> v = w.to_vector<double>();
  const double bound = 1.0 / std::sqrt(300.0);  // nn.Linear: U(-1/sqrt(in), 1/sqrt(in))
  double largest = 0;
  for (double x : v) largest = std::max(largest, std::fabs(x));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.999 * bound);
  Tensor flat = Tensor::empty({5});
  EXPECT_THROW(ops::kaiming_uniform_(flat, 0.0, gen), Error);
}

// A strided view is filled in its own row-major order, through a buffer.
TEST(RandomInit, StridedViewFillsInRowMajorOrder) {
  rng::Generator a(3), b(3);
  Tensor base = Tensor::zeros({6, 4});
  Tensor view = base.transpose(0, 1);  // 4 x 6, not contiguous
  ops::uniform_(view, 0.0, 1.0, a);
  Tensor direct = Tensor::empty({4, 6});
  ops::uniform_(direct, 0.0, 1.0, b);
  EXPECT_EQ(view.to_vector<float>(), direct.to_vector<float>());
}

}  // namespace
}  // namespace reprise::testing
