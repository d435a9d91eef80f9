// The f32 exp and tanh of engine/functors.h (fn::exp_poly, fn::tanh_poly),
// through the CPU backend's unary op over a sweep of every 61st float of
// their ranges plus the edges: within their stated ulp bounds of the
// correctly rounded value, with the documented special values, and the
// same bits at every CPU capability this machine supports (AVX-512 scales
// by 2^n with one instruction, the others with two multiplications: both
// round the exact product once, subnormal results included).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend.h"
#include "tests/support/capabilities.h"

namespace reprise::testing {
namespace {

// Floats in [lo, hi], every `step`-th by bit pattern, then lo, hi and the
// special values.
std::vector<float> sweep(float lo, float hi, uint32_t step) {
  std::vector<float> xs;
  auto push_range = [&](float from, float to) {  // same sign, |from| <= |to|
    const uint32_t a = std::bit_cast<uint32_t>(from), b = std::bit_cast<uint32_t>(to);
    for (uint64_t u = a; u <= b; u += step) xs.push_back(std::bit_cast<float>(uint32_t(u)));
  };
  push_range(0.0f, hi);
  push_range(-0.0f, lo);
  for (float v : {lo, hi, std::nextafter(lo, 0.0f), std::nextafter(hi, 0.0f),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  1e-30f, -1e-30f})
    xs.push_back(v);
  return xs;
}

// Float ulps between a and b: distance on the line of bit patterns ordered
// like the values (+0 and -0 one apart).
int64_t ulps(float a, float b) {
  auto ordered = [](float v) {
    const int32_t i = std::bit_cast<int32_t>(v);
    return i < 0 ? int64_t(std::numeric_limits<int32_t>::min()) - i : int64_t(i);
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

std::vector<float> run(UnaryOp op, const std::vector<float>& xs) {
  const Tensor x = Tensor::from_vector(xs, {int64_t(xs.size())});
  const Tensor y = cpu_backend().unary(op, 0.0, x);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

// The largest ulp error of op over xs against `reference` (double, rounded
// to float), and its argument.
std::pair<int64_t, float> worst(UnaryOp op, const std::vector<float>& xs,
                                double (*reference)(double)) {
  const std::vector<float> ys = run(op, xs);
  std::pair<int64_t, float> w{0, 0.0f};
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t e = ulps(ys[i], float(reference(double(xs[i]))));
    if (e > w.first) w = {e, xs[i]};
  }
  return w;
}

TEST(ExpPoly, WithinOneUlpOverItsRangeAtThisCapability) {
  const auto [err, at] = worst(UnaryOp::exp, sweep(-110.0f, 90.0f, 61), std::exp);
  EXPECT_LE(err, 1) << "at x = " << at;
}

TEST(TanhPoly, WithinTwoUlpOverItsRangeAtThisCapability) {
  const auto [err, at] = worst(UnaryOp::tanh, sweep(-12.0f, 12.0f, 61), std::tanh);
  EXPECT_LE(err, 2) << "at x = " << at;
}

TEST(ExpPoly, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> y =
      run(UnaryOp::exp, {0.0f, -0.0f, 88.7229f, inf, -104.0f, -inf, nan, 89.0f, 1000.0f, -1000.0f});
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], inf);
  EXPECT_EQ(y[3], inf);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[4]), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[5]), 0u);
  EXPECT_TRUE(std::isnan(y[6]));
  EXPECT_EQ(y[7], inf);
  EXPECT_EQ(y[8], inf);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[9]), 0u);
  // The largest finite result, and the subnormal results: e^-100 is 3.7e-44, 26 times the smallest
  // float.
  EXPECT_EQ(run(UnaryOp::exp, {88.72283935546875f})[0], float(std::exp(88.72283935546875)));
  EXPECT_EQ(run(UnaryOp::exp, {-100.0f})[0], float(std::exp(-100.0)));
}

TEST(TanhPoly, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> y = run(UnaryOp::tanh, {0.0f, -0.0f, 20.0f, -20.0f, inf, -inf,
                                                   std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(std::bit_cast<uint32_t>(y[0]), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[1]), 0x80000000u);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_EQ(y[4], 1.0f);
  EXPECT_EQ(y[5], -1.0f);
  EXPECT_TRUE(std::isnan(y[6]));
}

TEST(ExpPoly, SameBitsAtEveryCapability) {
  const std::vector<float> exp_x = sweep(-110.0f, 90.0f, 997), tanh_x = sweep(-12.0f, 12.0f, 997);
  std::vector<float> exp_ref, tanh_ref;
  for_each_capability([&](CpuCapability c) {
    const std::vector<float> e = run(UnaryOp::exp, exp_x), t = run(UnaryOp::tanh, tanh_x);
    if (exp_ref.empty()) {
      exp_ref = e;
      tanh_ref = t;
      return;
    }
    EXPECT_EQ(std::memcmp(e.data(), exp_ref.data(), e.size() * sizeof(float)), 0)
        << "exp at " << to_string(c);
    EXPECT_EQ(std::memcmp(t.data(), tanh_ref.data(), t.size() * sizeof(float)), 0)
        << "tanh at " << to_string(c);
  });
}

}  // namespace
}  // namespace reprise::testing
