// The f32 math of engine/functors.h (exp_poly, tanh_poly, log_poly and the
// functions built on it, sin_cos_poly, erf_poly), through the CPU
// backend's unary op over a sweep of every 61st float of their ranges
// (251st for sin and cos) plus the edges: within their stated ulp bounds
// of the correctly rounded value, with the documented special values, and
// the same bits at every CPU capability this machine supports (AVX-512
// scales by 2^n with one instruction, the others with two
// multiplications: both round the exact product once, subnormal results
// included).
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
// like the values (+0 and -0 one apart); two NaNs agree.
int64_t ulps(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
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

// The other f32 functions of engine/functors.h, each within its stated
// bound of the correctly rounded value over a sweep of its range.
TEST(MathPoly, WithinTheirUlpBoundsAtThisCapability) {
  struct Case {
    UnaryOp op;
    float lo, hi;
    uint32_t step;
    double (*reference)(double);
    int64_t bound;
  };
  const Case cases[] = {
      {UnaryOp::log, 0.0f, 3.4e38f, 61, std::log, 1},
      {UnaryOp::log1p, -0.99999994f, 3.4e38f, 61, std::log1p, 2},
      {UnaryOp::expm1, -90.0f, 89.0f, 61, std::expm1, 2},
      {UnaryOp::sin, -1e6f, 1e6f, 251, std::sin, 2},
      {UnaryOp::cos, -1e6f, 1e6f, 251, std::cos, 2},
      {UnaryOp::erf, -10.0f, 10.0f, 61, std::erf, 6},
  };
  for (const Case& c : cases) {
    const auto [err, at] = worst(c.op, sweep(c.lo, c.hi, c.step), c.reference);
    EXPECT_LE(err, c.bound) << unary_op_name(c.op) << " at x = " << at;
  }
}

TEST(MathPoly, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
  const std::vector<float> lg = run(UnaryOp::log, {0.0f, -0.0f, -1.0f, inf, nan, 1.0f, 1e-45f});
  EXPECT_EQ(lg[0], -inf);
  EXPECT_EQ(lg[1], -inf);
  EXPECT_TRUE(std::isnan(lg[2]));
  EXPECT_EQ(lg[3], inf);
  EXPECT_TRUE(std::isnan(lg[4]));
  EXPECT_EQ(bits(lg[5]), 0u);
  EXPECT_EQ(lg[6], float(std::log(double(1e-45f))));  // the smallest subnormal
  const std::vector<float> lp = run(UnaryOp::log1p, {-1.0f, -2.0f, inf, -0.0f, 1e-30f});
  EXPECT_EQ(lp[0], -inf);
  EXPECT_TRUE(std::isnan(lp[1]));
  EXPECT_EQ(lp[2], inf);
  EXPECT_EQ(bits(lp[3]), 0x80000000u);
  EXPECT_EQ(lp[4], 1e-30f);
  const std::vector<float> em = run(UnaryOp::expm1, {-0.0f, inf, -inf, 1e-30f});
  EXPECT_EQ(bits(em[0]), 0x80000000u);
  EXPECT_EQ(em[1], inf);
  EXPECT_EQ(em[2], -1.0f);
  EXPECT_EQ(em[3], 1e-30f);
  const std::vector<float> sn = run(UnaryOp::sin, {-0.0f, inf, -inf, nan});
  EXPECT_EQ(bits(sn[0]), 0x80000000u);
  for (size_t i = 1; i < sn.size(); ++i) EXPECT_TRUE(std::isnan(sn[i]));
  EXPECT_EQ(run(UnaryOp::cos, {-0.0f})[0], 1.0f);
  const std::vector<float> ef = run(UnaryOp::erf, {inf, -inf, -0.0f, nan, 4.0f});
  EXPECT_EQ(ef[0], 1.0f);
  EXPECT_EQ(ef[1], -1.0f);
  EXPECT_EQ(bits(ef[2]), 0x80000000u);
  EXPECT_TRUE(std::isnan(ef[3]));
  EXPECT_EQ(ef[4], 1.0f);
}

TEST(MathPoly, SameBitsAtEveryCapability) {
  for (UnaryOp op : {UnaryOp::log, UnaryOp::log1p, UnaryOp::expm1, UnaryOp::sin, UnaryOp::cos,
                     UnaryOp::erf, UnaryOp::gelu_erf, UnaryOp::logsigmoid}) {
    const std::vector<float> xs = sweep(-2e4f, 2e4f, 997);
    std::vector<float> reference;
    for_each_capability([&](CpuCapability c) {
      const std::vector<float> y = run(op, xs);
      if (reference.empty()) {
        reference = y;
        return;
      }
      EXPECT_EQ(std::memcmp(y.data(), reference.data(), y.size() * sizeof(float)), 0)
          << unary_op_name(op) << " at " << to_string(c);
    });
  }
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
