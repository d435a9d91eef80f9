// Anomaly detection: the first op whose forward output or backward gradient
// holds a NaN or an infinity raises an Error naming it, its scope and the
// shapes; with detection off nothing is checked.
#include "autograd/anomaly.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/backward.h"
#include "autograd/scope.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace reprise::autograd {
namespace {

Tensor grad_leaf(std::vector<double> v) {
  Shape s{int64_t(v.size())};
  return Tensor::from_vector(v, s).requires_grad(true);
}

// The message of the Error that `fn` raises ("" when it raises none).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Anomaly, LogOfANegativeNumberNamesTheOpItsScopeAndShapes) {
  const DetectAnomaly on;
  Tensor x = grad_leaf({1, -2, 3});
  const std::string m = error_of([&] {
    const Scope layer("layers.0.mlp");
    (void)ops::log(ops::exp(x));  // exp is finite: not the culprit
    (void)ops::log(x);
  });
  EXPECT_NE(m.find("anomaly: log at layers.0.mlp produced NaN in forward: output 0 f64[3]"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("from inputs f64[3]"), std::string::npos) << m;
}

TEST(Anomaly, DivisionByZeroIsAnInfinityInForward) {
  const DetectAnomaly on;
  Tensor a = grad_leaf({1, 2}), b = grad_leaf({1, 0});
  const std::string m = error_of([&] { (void)ops::div(a, b); });
  EXPECT_NE(m.find("anomaly: div produced inf in forward"), std::string::npos) << m;
}

TEST(Anomaly, BackwardNamesTheNodeWhoseGradientIsNotFinite) {
  Tensor x = grad_leaf({4, 0});
  // sqrt(0) = 0 is finite; its gradient 1 / (2 sqrt(0)) is not.
  Tensor y = ops::sum(ops::sqrt(x));
  const DetectAnomaly on;
  const std::string m = error_of([&] { backward(y); });
  EXPECT_NE(m.find("anomaly: the backward of sqrt produced inf in the gradient of input 0 f64[2]"),
            std::string::npos)
      << m;
}

TEST(Anomaly, OffByDefaultAndRestoredByTheGuard) {
  EXPECT_FALSE(detect_anomaly_enabled());
  {
    const DetectAnomaly on;
    EXPECT_TRUE(detect_anomaly_enabled());
  }
  EXPECT_FALSE(detect_anomaly_enabled());
  Tensor x = grad_leaf({-1});
  Tensor y = ops::log(x);
  EXPECT_TRUE(std::isnan(y.item<double>()));
}

TEST(Anomaly, FirstNonFinite) {
  EXPECT_EQ(first_non_finite(Tensor::from_vector(std::vector<float>{1, 2}, {2})), nullptr);
  EXPECT_STREQ(first_non_finite(Tensor::from_vector(std::vector<float>{1, NAN}, {2})), "NaN");
  EXPECT_STREQ(first_non_finite(Tensor::from_vector(std::vector<float>{-INFINITY, NAN}, {2})),
               "inf");
  EXPECT_EQ(first_non_finite(Tensor::from_vector(std::vector<int64_t>{1}, {1})), nullptr);
}

}  // namespace
}  // namespace reprise::autograd
