// Unary, binary, reduction and layout ops: forward values and bad input.
// Their cases are in tests/cases/elementwise.cpp.
#include <cfloat>
#include <cmath>
#include <limits>

#include "autograd/backward.h"
#include "engine/threads.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/bits.h"
#include "tests/support/capabilities.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using reprise::Tensor;

// PyTorch's softplus (beta 1, threshold 20), values and gradients from
// torch.nn.functional.softplus in f64: log1p(e^x) up to 20, x itself above,
// where the gradient is exactly 1.
TEST(ElementwiseForward, SoftplusIsPyTorchsWithItsThreshold) {
  const Tensor x =
      Tensor::from_vector<double>({-30, 0, 1, 19.9, 20, 20.5}, {6}).requires_grad(true);
  const Tensor y = ops::softplus(x);
  const std::vector<double> want{9.357622968839737e-14, 0.6931471805599453, 1.3132616875182228,
                                 19.900000002277924,    20.000000002061153, 20.5};
  const std::vector<double> want_grad{
      9.3576229688393e-14, 0.5, 0.7310585786300049, 0.9999999977220729, 0.9999999979388464, 1.0};
  const std::vector<double> got = y.to_vector<double>();
  const std::vector<double> grad = autograd::grad({ops::sum(y)}, {x})[0].to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-15 * std::max(1.0, want[i])) << "x = " << i;
    EXPECT_NEAR(grad[i], want_grad[i], 1e-15) << "x = " << i;
  }
  EXPECT_EQ(got[5], 20.5);
  EXPECT_EQ(grad[5], 1.0);
}

TEST(ElementwiseForward, MatchesHandComputedValues) {
  Tensor x = Tensor::from_vector<float>({-1.f, 0.f, 2.f}, {3});
  EXPECT_EQ(ops::relu(x).to_vector<float>(), (std::vector<float>{0.f, 0.f, 2.f}));
  std::vector<float> s = ops::silu(x).to_vector<float>();
  EXPECT_FLOAT_EQ(s[0], -1.f / (1.f + std::exp(1.f)));
  EXPECT_FLOAT_EQ(s[2], 2.f / (1.f + std::exp(-2.f)));
  // gelu(1) with the tanh form is 0.8411919906082768.
  EXPECT_NEAR(ops::gelu(Tensor::scalar(1.0, DType::f64)).item<double>(), 0.8411919906082768, 1e-15);
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ(ops::add(a, b).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(ops::sum(a, {0}).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(ops::sum(a, {1}).to_vector<float>(), (std::vector<float>{6, 15}));
  EXPECT_FLOAT_EQ(ops::mean(a).item<float>(), 3.5f);
  auto m = ops::max(a, 1);
  EXPECT_EQ(m.values.to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
}

// The first position of the maximum; a NaN anywhere in the row wins (the
// first NaN), as in torch.max; -0 and +0 tie, so the first is kept. Rows of
// 37 cover the vector body and its tail.
TEST(Reductions, MaxTakesTheFirstMaximumAndNaNWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(4 * 37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 7 % 37)) - 18;
  v[0 * 37 + 5] = v[0 * 37 + 30] = 100;  // row 0: max at 5 and 30
  v[1 * 37 + 3] = 100;                   // row 1: a NaN after the max
  v[1 * 37 + 33] = nan;
  v[2 * 37 + 0] = nan;  // row 2: NaN first, another later
  v[2 * 37 + 20] = nan;
  for (int i = 0; i < 37; ++i) v[3 * 37 + i] = -1;  // row 3: -0 then +0 on top
  v[3 * 37 + 36] = 0.0f;
  v[3 * 37 + 10] = -0.0f;
  const auto m = ops::max(Tensor::from_vector(v, {4, 37}), 1);
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{5, 33, 0, 10}));
  const std::vector<float> values = m.values.to_vector<float>();
  EXPECT_EQ(values[0], 100);
  EXPECT_TRUE(std::isnan(values[1]) && std::isnan(values[2]));
  EXPECT_TRUE(values[3] == 0 && std::signbit(values[3]));
}

// f32 silu, sigmoid and gelu (their exp is ops::detail::exp_f32, not libm)
// against the same ops in f64, forward and gradient, at 24001 points of
// [-30, 30]: |y32 - y64| <= k (ulp(y64) + 2^-24). The 2^-24 term is an
// absolute floor at the inputs' scale, where f32 has no relative accuracy
// to give: near a zero of the gradients, and where results underflow. k
// bounds the roundings of each formula: 2 forward (measured <= 1.31), 16 for
// the gradients (measured <= 11, gelu's at x = 4.96).
TEST(ElementwiseForward, F32ActivationsMatchF64) {
  constexpr int kPoints = 24001;
  std::vector<float> xs(kPoints);
  for (int i = 0; i < kPoints; ++i) xs[size_t(i)] = -30.f + 60.f * float(i) / float(kPoints - 1);
  const std::vector<double> xd(xs.begin(), xs.end());
  auto ulps = [](float got, double want) {
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::abs(want), double(FLT_MIN))) - 23);
    return std::abs(double(got) - want) / (ulp + 0x1p-24);
  };
  const std::pair<const char*, Tensor (*)(const Tensor&)> ops_under_test[] = {
      {"silu", ops::silu}, {"sigmoid", ops::sigmoid}, {"gelu", ops::gelu}};
  for (const auto& [name, op] : ops_under_test) {
    Tensor x32 = Tensor::from_vector(xs, {kPoints}).requires_grad(true);
    Tensor x64 = Tensor::from_vector(xd, {kPoints}).requires_grad(true);
    Tensor y32 = op(x32), y64 = op(x64);
    const std::vector<float> f = y32.to_vector<float>();
    const std::vector<double> fd = y64.to_vector<double>();
    const std::vector<float> g =
        autograd::grad({y32}, {x32}, {Tensor::ones({kPoints})})[0].to_vector<float>();
    const std::vector<double> gd =
        autograd::grad({y64}, {x64}, {Tensor::ones({kPoints}, DType::f64)})[0].to_vector<double>();
    double worst_y = 0, worst_g = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      worst_y = std::max(worst_y, ulps(f[i], fd[i]));
      worst_g = std::max(worst_g, ulps(g[i], gd[i]));
    }
    EXPECT_LE(worst_y, 2.0) << name;
    EXPECT_LE(worst_g, 16.0) << name;
  }
}

// f32 runs go 16 lanes at a time whatever their strides (cpu/loops.h): at
// every capability, an operand read through strides (a transpose, a
// broadcast) gives the bits of its contiguous copy, forward and backward,
// in the 16-lane steps and the tail past them (29 and 37 columns).
TEST(ElementwiseForward, StridedOperandsGiveTheBitsOfTheirContiguousCopies) {
  for_each_capability([](CpuCapability c) {
    uint64_t seed = 80;
    for (const UnaryOpRow& row : kUnaryOpRows) {
      if (row.takes_scalar) continue;
      const Tensor x = uniform({29, 37}, row.lo, row.hi, ++seed, DType::f32);
      const Tensor strided = x.detach().requires_grad(true);
      const Tensor contiguous = x.transpose(0, 1).contiguous().requires_grad(true);
      const Tensor y_strided = ops::unary(row.op, ops::transpose(strided, 0, 1));
      const Tensor y_contiguous = ops::unary(row.op, contiguous);
      EXPECT_TRUE(same_bytes(y_strided.contiguous(), y_contiguous))
          << row.name << ", " << to_string(c);
      const Tensor dy = uniform({37, 29}, -1, 1, ++seed, DType::f32);
      const Tensor dx_strided = autograd::grad({y_strided}, {strided}, {dy})[0];
      const Tensor dx_contiguous = autograd::grad({y_contiguous}, {contiguous}, {dy})[0];
      EXPECT_TRUE(same_bytes(dx_strided.transpose(0, 1).contiguous(), dx_contiguous))
          << row.name << ", " << to_string(c);
    }
    const Tensor a = uniform({37, 29}, -2, 2, ++seed, DType::f32);
    const Tensor column = uniform({37, 1}, 0.5, 2, ++seed, DType::f32);
    const Tensor wide = ops::expand(column, {37, 29}).contiguous();
    const std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)> binary[] = {
        {"add", ops::add}, {"sub", ops::sub},         {"mul", ops::mul},
        {"div", ops::div}, {"maximum", ops::maximum}, {"minimum", ops::minimum}};
    for (const auto& [name, op] : binary) {
      EXPECT_TRUE(same_bytes(op(a, column), op(a, wide))) << name << ", " << to_string(c);
      EXPECT_TRUE(same_bytes(op(column, a), op(wide, a))) << name << ", " << to_string(c);
    }
  });
}

TEST(ElementwiseForward, ReductionIsIndependentOfThreadCount) {
  Tensor x = uniform({513, 1031}, -1, 1, 5, DType::f32);
  int before = threads::num_threads();
  threads::set_num_threads(1);
  std::vector<float> one = ops::sum(x, {0}).to_vector<float>();
  float all_one = ops::sum(x).item<float>();
  threads::set_num_threads(2);
  std::vector<float> two = ops::sum(x, {0}).to_vector<float>();
  float all_two = ops::sum(x).item<float>();
  threads::set_num_threads(before);
  EXPECT_EQ(one, two);
  EXPECT_EQ(all_one, all_two);
}

TEST(ElementwiseBadInput, MessagesNameOpAndShapes) {
  Tensor a = Tensor::zeros({3, 5});
  Tensor b = Tensor::zeros({4, 5});
  expect_error([&] { ops::add(a, b); }, {"add", "[3, 5]", "[4, 5]"});
  expect_error(
      [&] {
        ops::mul(a, Tensor::zeros({3, 5}, DType::f64));
      },
      {"mul: dtype mismatch", "f64[3, 5]"});
  EXPECT_THROW(ops::exp(Tensor::zeros({2}, DType::i64)), Error);
  EXPECT_THROW(ops::sum(a, {2}), Error);
  EXPECT_THROW(ops::reshape(a, {4, 4}), Error);
  EXPECT_THROW(Tensor::zeros({2}, DType::f32, Device::cuda(0)).numel(), Error);
}

}  // namespace
}  // namespace reprise::testing
