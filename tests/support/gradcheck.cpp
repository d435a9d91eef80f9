#include "tests/support/gradcheck.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "autograd/backward.h"
#include "ops/binary.h"
#include "ops/reduce.h"

namespace reprise::testing {
namespace {

// sum_i <outputs_i, weights_i> over the floating outputs, in doubles.
double weighted_sum(const Outputs& outputs, const std::vector<Tensor>& weights) {
  double s = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!weights[k].defined()) continue;
    const std::vector<double> v = outputs[k].to_vector<double>(),
                              w = weights[k].to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
  }
  return s;
}

}  // namespace

std::vector<Tensor> output_weights(const Outputs& outputs) {
  std::vector<Tensor> weights;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& y = outputs[k];
    weights.push_back(y.defined() && is_floating(y.dtype())
                          ? uniform(y.shape(), -1.0, 1.0, 977 + k, y.dtype()).to(y.device())
                          : Tensor());
  }
  return weights;
}

Tensor weighted_loss(const Outputs& outputs, const std::vector<Tensor>& weights) {
  Tensor loss;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!weights[k].defined() || !outputs[k].requires_grad()) continue;
    const Tensor term = ops::sum(ops::mul(outputs[k], weights[k]));
    loss = loss.defined() ? ops::add(loss, term) : term;
  }
  return loss;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  const Tensor ac = a.to(Device::cpu()).contiguous(), bc = b.to(Device::cpu()).contiguous();
  const std::vector<double> x = ac.to_vector<double>(), y = bc.to_vector<double>();
  const auto* pa = static_cast<const unsigned char*>(ac.raw_data());
  const auto* pb = static_cast<const unsigned char*>(bc.raw_data());
  const size_t width = a.element_size();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::memcmp(pa + i * width, pb + i * width, width) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult gradcheck(const OpFn& fn, const Inputs& inputs, GradcheckOptions o) {
  const Outputs out = fn(inputs);
  const std::vector<Tensor> weights = output_weights(out);

  Inputs diff;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) diff.push_back(t);
  }
  if (diff.empty()) return ::testing::AssertionFailure() << "no input requires grad";
  const Tensor loss = weighted_loss(out, weights);
  if (!loss.defined()) return ::testing::AssertionFailure() << "no output takes a gradient";
  autograd::Tensors analytic = autograd::grad({loss}, diff, {}, {}, /*allow_unused=*/true);

  std::ostringstream failures;
  int bad = 0;
  for (size_t k = 0; k < diff.size(); ++k) {
    const Tensor& x = diff[k];
    EXPECT_TRUE(x.is_contiguous()) << "gradcheck inputs must be contiguous";
    std::vector<double> a = analytic[k].defined() ? analytic[k].to_vector<double>()
                                                  : std::vector<double>(size_t(x.numel()), 0.0);
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double saved = p[i];
      double plus, minus;
      {
        NoGradGuard no_grad;
        p[i] = saved + o.eps;
        plus = weighted_sum(fn(inputs), weights);
        p[i] = saved - o.eps;
        minus = weighted_sum(fn(inputs), weights);
        p[i] = saved;
      }
      double numeric = (plus - minus) / (2 * o.eps);
      if (!(std::abs(a[size_t(i)] - numeric) <= o.atol + o.rtol * std::abs(numeric))) {
        if (bad++ < 5) {
          failures << "\n  input " << k << " " << x.describe() << " element " << i << ": analytic "
                   << a[size_t(i)] << " numeric " << numeric;
        }
      }
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " mismatching elements" << failures.str();
  return ::testing::AssertionSuccess();
}

}  // namespace reprise::testing
