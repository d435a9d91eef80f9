// softmax, log_softmax, cross_entropy, rmsnorm, layernorm, rotary and
// embedding: forward values, thread-count independence and bad input. Their
// cases are in tests/cases/nn.cpp, the comparison against PyTorch in
// nn_ops_golden_test.cpp.
#include <array>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>

#include "autograd/backward.h"
#include "engine/functors.h"
#include "engine/threads.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/embedding.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/softmax.h"
#include "ops/views.h"
#include "tests/support/capabilities.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using reprise::Tensor;

// ---- forward values ------------------------------------------------------------

TEST(Softmax, MatchesHandComputedValues) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 1000, 1001, 1002}, {2, 3});
  // softmax(1, 2, 3) = e^k / (e + e^2 + e^3); a shift by 999 changes nothing.
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  std::vector<double> s = ops::softmax(x).to_vector<double>();
  std::vector<double> ls = ops::log_softmax(x).to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(s[size_t(3 * r + k)], std::exp(k + 1.0) / z, 1e-15);
      EXPECT_NEAR(ls[size_t(3 * r + k)], (k + 1.0) - std::log(z), 1e-12);
    }
  }
  // Over dim 0 of [[1, 2, 3], [1000, 1001, 1002]] every column is (~0, ~1).
  std::vector<double> c = ops::softmax(x, 0).to_vector<double>();
  EXPECT_NEAR(c[0], std::exp(-999.0), 1e-300);
  EXPECT_DOUBLE_EQ(c[3], 1.0);
}

TEST(CrossEntropy, MatchesLogSoftmaxOfTargets) {
  Tensor logits = uniform({6, 5}, -2, 2, 7);
  Tensor targets = i64({1, -100, 4, 0, -100, 2}, {6});
  std::vector<double> ls = ops::log_softmax(logits).to_vector<double>();
  std::vector<int64_t> t = targets.to_vector<int64_t>();
  double sum = 0;
  int count = 0;
  for (int n = 0; n < 6; ++n) {
    if (t[size_t(n)] == -100) continue;
    sum -= ls[size_t(n * 5 + t[size_t(n)])];
    ++count;
  }
  EXPECT_NEAR(ops::cross_entropy(logits, targets).item<double>(), sum / count, 1e-14);
  EXPECT_NEAR(ops::cross_entropy(logits, targets, -100, ops::Reduction::sum).item<double>(), sum,
              1e-14);
}

TEST(CrossEntropy, AllIgnoredGivesNanLossAndZeroGradient) {
  Tensor logits = param({3, 4}, 8);
  Tensor loss = ops::cross_entropy(logits, i64({-100, -100, -100}, {3}));
  EXPECT_TRUE(std::isnan(loss.item<double>()));
  autograd::backward(loss);
  for (double g : logits.grad().to_vector<double>()) EXPECT_EQ(g, 0.0);
}

// bf16 logits (a head's product under bf16 autocast): the loss and lse of
// the f32 op on the widened logits, and its gradient rounded once to bf16,
// bit for bit at every capability; rows of 16 and a tail, the target in
// either, and an ignored row.
TEST(CrossEntropy, Bf16LogitsGiveTheWidenedF32BitsAndGradient) {
  const Tensor logits = ops::cast(uniform({7, 37}, -6, 6, 31, DType::f32), DType::bf16);
  const Tensor targets = i64({0, 36, 15, 16, -100, 33, 2}, {7});
  auto run = [&](const Tensor& x_in) {
    Tensor x = x_in.detach().requires_grad(true);
    Tensor loss = ops::cross_entropy(x, targets);
    autograd::backward(ops::mul(loss, 0.75));
    return std::array<Tensor, 2>{loss, x.grad()};
  };
  const std::array<Tensor, 2> f32 = run(ops::cast(logits, DType::f32));
  for_each_capability([&](CpuCapability c) {
    const std::array<Tensor, 2> got = run(logits);
    ASSERT_EQ(got[0].dtype(), DType::f32);
    ASSERT_EQ(got[1].dtype(), DType::bf16);
    EXPECT_TRUE(same_bits(got[0], f32[0])) << to_string(c);
    EXPECT_TRUE(same_bits(got[1], ops::cast(f32[1], DType::bf16))) << to_string(c);
  });
}

TEST(Rmsnorm, MatchesHandComputedValues) {
  // Row (3, 4): mean(x^2) = 12.5, y = w * x / sqrt(12.5 + eps).
  Tensor x = Tensor::from_vector<double>({3, 4}, {1, 2});
  Tensor w = Tensor::from_vector<double>({2, -1}, {2});
  std::vector<double> y = ops::rmsnorm(x, w, 0.5).to_vector<double>();
  EXPECT_NEAR(y[0], 2 * 3 / std::sqrt(13.0), 1e-15);
  EXPECT_NEAR(y[1], -4 / std::sqrt(13.0), 1e-15);
}

TEST(Layernorm, MatchesHandComputedValues) {
  // Row (1, 3): mean 2, biased var 1, xhat = (-1, 1) / sqrt(1 + eps).
  Tensor x = Tensor::from_vector<double>({1, 3}, {1, 2});
  Tensor w = Tensor::from_vector<double>({2, 3}, {2});
  Tensor b = Tensor::from_vector<double>({0.5, -0.5}, {2});
  std::vector<double> y = ops::layernorm(x, w, b, 0.25).to_vector<double>();
  EXPECT_NEAR(y[0], -2 / std::sqrt(1.25) + 0.5, 1e-15);
  EXPECT_NEAR(y[1], 3 / std::sqrt(1.25) - 0.5, 1e-15);
  std::vector<double> nb = ops::layernorm(x, w, Tensor(), 0.25).to_vector<double>();
  EXPECT_NEAR(nb[1], 3 / std::sqrt(1.25), 1e-15);
}

TEST(Rotary, RotatesPairsByPositionTimesFrequency) {
  // D = 4: frequencies 1 and theta^-1/2 = 0.1 for theta = 100.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 1, 4});
  std::vector<double> y = ops::rotary(x, 2, 100.0).to_vector<double>();
  const double a0 = 2.0, a1 = 0.2;  // position 2 times each frequency
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-15);
  EXPECT_NEAR(y[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-15);
  EXPECT_NEAR(y[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-15);
  EXPECT_NEAR(y[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-15);
  // Same positions and D, another theta: the cached tables must not be reused.
  std::vector<double> z = ops::rotary(x, 2, 10000.0).to_vector<double>();
  EXPECT_NEAR(z[1], 2 * std::cos(0.02) - 4 * std::sin(0.02), 1e-15);
}

TEST(Rotary, StartOffsetEqualsExplicitPositionsAndPreservesNorm) {
  Tensor x = uniform({2, 3, 6, 16}, -1, 1, 9, DType::f32);
  Tensor a = ops::rotary(x, 5, 10000.0);
  Tensor b = ops::rotary(x, i64({5, 6, 7, 8, 9, 10}, {6}), 10000.0);
  Tensor c = ops::rotary(x, Tensor::from_vector(std::vector<int32_t>{5, 6, 7, 8, 9, 10}, {6}));
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(a.to_vector<float>(), c.to_vector<float>());
  // A rotation keeps each head vector's norm.
  Tensor nx = ops::sum(ops::mul(x, x), {-1}), na = ops::sum(ops::mul(a, a), {-1});
  EXPECT_LT(max_abs_diff(nx, na), 1e-5);
}

// bf16 q or k (kept 16-bit under autocast): rotated in f32 with f32
// frequencies and rounded once, forward and backward, bit for bit the f32
// rotation of the widened values rounded to bf16, at every capability.
TEST(Rotary, Bf16IsTheF32RotationRoundedOnce) {
  const Tensor x = ops::cast(uniform({2, 3, 5, 16}, -4, 4, 33, DType::f32), DType::bf16);
  const Tensor dy = ops::cast(uniform({2, 3, 5, 16}, -1, 1, 34, DType::f32), DType::bf16);
  const Tensor inv_freq = ops::rope_inv_freq(16, 10000.0, DType::f32);
  auto run = [&](const Tensor& x_in, const Tensor& d) {
    Tensor in = x_in.detach().requires_grad(true);
    Tensor y = ops::rotary(in, 7, inv_freq, 1.25);
    autograd::backward(y, d);
    return std::array<Tensor, 2>{y, in.grad()};
  };
  const auto wide = [](const Tensor& t) { return ops::cast(t, DType::f32); };
  const std::array<Tensor, 2> f32 = run(wide(x), wide(dy));
  for_each_capability([&](CpuCapability c) {
    const std::array<Tensor, 2> got = run(x, dy);
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(got[i].dtype(), DType::bf16);
      EXPECT_TRUE(same_bits(got[i], ops::cast(f32[i], DType::bf16))) << i << ", " << to_string(c);
    }
  });
  expect_error([&] { ops::rotary(x, 0, ops::rope_inv_freq(16, 10000.0, DType::f64)); },
               {"rotary", "inv_freq", "f32", "bf16[2, 3, 5, 16]"});
}

TEST(Embedding, GathersRows) {
  Tensor w = Tensor::from_vector<float>({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor y = ops::embedding(w, i64({2, 0, 2, 1}, {2, 2}));
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
}

// torch's padding_idx: the forward reads the row as any other; its
// gradient is 0, and every other row's is what it is without one.
TEST(Embedding, APaddingRowGetsNoGradient) {
  const Tensor ids = i64({2, 0, 2, 1}, {2, 2});
  const Tensor dy = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  auto grad = [&](std::optional<int64_t> padding_idx) {
    Tensor w = Tensor::from_vector<float>({0, 1, 10, 11, 20, 21}, {3, 2}).requires_grad(true);
    const Tensor y = ops::embedding(w, ids, padding_idx);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
    autograd::backward(ops::sum(ops::mul(y, dy)));
    return w.grad().to_vector<float>();
  };
  EXPECT_EQ(grad(std::nullopt), (std::vector<float>{3, 4, 7, 8, 6, 8}));
  EXPECT_EQ(grad(2), (std::vector<float>{3, 4, 7, 8, 0, 0}));
  EXPECT_EQ(grad(0), (std::vector<float>{0, 0, 7, 8, 6, 8}));
  expect_error(
      [&] {
        ops::embedding(Tensor::zeros({3, 2}), ids, 3);
      },
      {"embedding: padding_idx 3 is not a row of weight f32[3, 2]"});
}

TEST(SharedMath, ExpF32WithinOneUlpOfExp) {
  // Every 4099th bit pattern whose float lies in [-104, 88.72]: normal and
  // subnormal results, about 460K points.
  double worst = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4099) {
    const float x = std::bit_cast<float>(uint32_t(u));
    if (!(x >= -104.0f && x <= 88.72f)) continue;
    const double want = std::exp(double(x));
    const float near = float(want);
    const double ulp = want < double(std::numeric_limits<float>::min())
                           ? double(std::numeric_limits<float>::denorm_min())
                           : double(std::nextafter(near, INFINITY) - near);
    worst = std::max(worst, std::abs(double(fn::exp_of(x)) - want) / ulp);
  }
  EXPECT_LT(worst, 1.02);
  EXPECT_EQ(fn::exp_of(0.0f), 1.0f);
  EXPECT_EQ(fn::exp_of(-INFINITY), 0.0f);
  EXPECT_EQ(fn::exp_of(-200.0f), 0.0f);
  EXPECT_EQ(fn::exp_of(89.0f), INFINITY);
  EXPECT_EQ(fn::exp_of(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(fn::exp_of(NAN)));
}

// ---- results do not depend on the thread count ---------------------------------

// Runs f with 1 thread and with 3 and expects the same bits.
template <class F>
void expect_thread_independent(F f) {
  int before = threads::num_threads();
  threads::set_num_threads(1);
  std::vector<std::vector<float>> one = f();
  threads::set_num_threads(3);
  std::vector<std::vector<float>> three = f();
  threads::set_num_threads(before);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], three[i]) << "result " << i;
}

Tensor f32_param(const Shape& shape, uint64_t seed) {
  return uniform(shape, -1, 1, seed, DType::f32).requires_grad(true);
}

TEST(NnOpsDeterminism, IndependentOfThreadCount) {
  expect_thread_independent([] {
    Tensor x = f32_param({1000, 64}, 1), w = f32_param({64}, 2), b = f32_param({64}, 3);
    Tensor y = ops::add(ops::rmsnorm(x, w), ops::layernorm(x, w, b));
    autograd::backward(ops::sum(ops::mul(y, uniform({1000, 64}, -1, 1, 4, DType::f32))));
    return std::vector<std::vector<float>>{y.to_vector<float>(), x.grad().to_vector<float>(),
                                           w.grad().to_vector<float>(),
                                           b.grad().to_vector<float>()};
  });
  expect_thread_independent([] {
    Tensor logits = f32_param({1000, 100}, 5);
    Tensor loss = ops::cross_entropy(logits, targets_with_ignored(1000, 100, -100));
    autograd::backward(loss);
    return std::vector<std::vector<float>>{loss.to_vector<float>(),
                                           logits.grad().to_vector<float>()};
  });
  expect_thread_independent([] {
    Tensor w = f32_param({500, 64}, 6);
    std::vector<int64_t> ids(4000);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * i * 31 + 7) % 500) % 60;
    Tensor y = ops::embedding(w, i64(ids, {40, 100}));
    autograd::backward(ops::sum(ops::mul(y, uniform({40, 100, 64}, -1, 1, 7, DType::f32))));
    return std::vector<std::vector<float>>{w.grad().to_vector<float>()};
  });
}

// ---- bad input -----------------------------------------------------------------

TEST(NnOpsBadInput, MessagesNameOpAndShapes) {
  Tensor x = Tensor::zeros({4, 6});
  expect_error([&] { ops::softmax(x, 2); }, {"softmax"});
  expect_error([&] { ops::log_softmax(Tensor::zeros({3}, DType::i64)); },
               {"log_softmax", "i64[3]"});

  Tensor logits = Tensor::zeros({4, 5});
  expect_error([&] { ops::cross_entropy(logits, Tensor::zeros({4})); },
               {"cross_entropy", "targets", "f32[4]", "i64", "f32[4, 5]"});
  expect_error(
      [&] {
        ops::cross_entropy(logits, i64({0, 1, 2}, {3}));
      },
      {"cross_entropy", "i64[3]", "f32[4, 5]", "[4]"});
  expect_error(
      [&] {
        ops::cross_entropy(logits, i64({0, 1, 5, 2}, {4}));
      },
      {"cross_entropy", "target 5", "row 2", "f32[4, 5]", "[0, 5)"});
  expect_error(
      [&] {
        ops::cross_entropy(Tensor::zeros({2, 3, 4}), i64({0, 1}, {2}));
      },
      {"cross_entropy", "(N, C)", "f32[2, 3, 4]"});

  expect_error([&] { ops::rmsnorm(x, Tensor::ones({5})); },
               {"rmsnorm", "w f32[5]", "f32[4, 6]", "[6]"});
  expect_error([&] { ops::rmsnorm(x, Tensor::ones({6}, DType::f64)); },
               {"rmsnorm", "dtype mismatch", "f64[6]"});
  expect_error([&] { ops::layernorm(x, Tensor::ones({6}), Tensor::zeros({4})); },
               {"layernorm", "b f32[4]", "f32[4, 6]", "[6]"});

  Tensor q = Tensor::zeros({2, 3, 5, 7});
  expect_error([&] { ops::rotary(q, 0); }, {"rotary", "D = 7", "f32[2, 3, 5, 7]", "even"});
  expect_error(
      [&] {
        ops::rotary(Tensor::zeros({2, 3, 5, 8}), i64({0, 1, 2}, {3}));
      },
      {"rotary", "i64[3]", "f32[2, 3, 5, 8]", "[5]", "[2, 5]"});
  expect_error(
      [&] {
        ops::rotary(Tensor::zeros({2, 3, 5, 8}), Tensor::zeros({5}));
      },
      {"rotary", "positions", "f32[5]"});
  expect_error([&] { ops::rotary(Tensor::zeros({3, 5, 8}), 0); }, {"rotary", "f32[3, 5, 8]"});

  Tensor table = Tensor::zeros({10, 4});
  expect_error([&] { ops::embedding(table, Tensor::zeros({3})); },
               {"embedding", "ids", "f32[3]", "f32[10, 4]"});
  expect_error(
      [&] {
        ops::embedding(table, i64({1, 10, 2}, {3}));
      },
      {"embedding", "id 10", "f32[10, 4]", "[0, 10)"});
  expect_error([&] { ops::embedding(table, i64({-1}, {1})); }, {"embedding", "id -1"});
  expect_error([&] { ops::embedding(Tensor::zeros({10}), i64({1}, {1})); },
               {"embedding", "(V, C)", "f32[10]"});
}

}  // namespace
}  // namespace reprise::testing
