// Comparisons and logic (ops/compare.h), where and masked_fill with
// scalars, clamp, and the reductions composed of max and the elementwise
// ops (amax, argmax, logsumexp, var, ...): values against hand-computed
// ones, errors, and the gradients of the composed ones in f64. The
// comparison kernel has no gradient, so the op table's backend checks do
// not reach it: here it runs at every CPU capability and on the CUDA
// simulator.
#include "ops/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/backward.h"
#include "ops/binary.h"
#include "ops/clamp.h"
#include "ops/indexing.h"
#include "ops/reduce.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/support/capabilities.h"
#include "tests/support/cuda_sim_backend.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(const std::vector<float>& v, Shape shape) { return Tensor::from_vector(v, shape); }

std::vector<bool> bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::boolean);
  std::vector<bool> out;
  for (int64_t v : t.to(DType::i64).to_vector<int64_t>()) out.push_back(v != 0);
  return out;
}

TEST(Compare, EveryOperatorBroadcastsAndTreatsNanAsIeeeDoes) {
  const Tensor a = f32({1, 2, float(kNan), -0.0f, 3, 5}, {2, 3});
  const Tensor b = f32({2, 2, 0}, {3});  // broadcast along rows
  // a: [[1, 2, nan], [-0, 3, 5]] against [2, 2, 0] in each row.
  EXPECT_EQ(bools(ops::eq(a, b)), (std::vector<bool>{false, true, false, false, false, false}));
  EXPECT_EQ(bools(ops::ne(a, b)), (std::vector<bool>{true, false, true, true, true, true}));
  EXPECT_EQ(bools(ops::lt(a, b)), (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_EQ(bools(ops::le(a, b)), (std::vector<bool>{true, true, false, true, false, false}));
  EXPECT_EQ(bools(ops::gt(a, b)), (std::vector<bool>{false, false, false, false, true, true}));
  EXPECT_EQ(bools(ops::ge(a, b)), (std::vector<bool>{false, true, false, false, true, true}));
  EXPECT_EQ(ops::eq(a, b).dtype(), DType::boolean);
  EXPECT_EQ(ops::eq(a, b).shape(), (Shape{2, 3}));
  // -0 == 0, and a scalar on the right.
  EXPECT_EQ(bools(ops::eq(a, 0.0)), (std::vector<bool>{false, false, false, true, false, false}));
  EXPECT_EQ(bools(ops::isnan(a)), (std::vector<bool>{false, false, true, false, false, false}));
}

TEST(Compare, IntegerBoolAndSixteenBitTensors) {
  const Tensor i = Tensor::from_vector(std::vector<int64_t>{-3, 0, 7}, {3});
  EXPECT_EQ(bools(ops::ge(i, 0.0)), (std::vector<bool>{false, true, true}));
  const Tensor h = f32({0.5f, 1.0f, 2.0f}, {3}).to(DType::bf16);
  EXPECT_EQ(bools(ops::lt(h, 1.0)), (std::vector<bool>{true, false, false}));
  const Tensor m = ops::gt(f32({1, -1, 2}, {3}), 0.0);
  EXPECT_EQ(bools(ops::logical_not(m)), (std::vector<bool>{false, true, false}));
  const Tensor n = ops::lt(f32({1, 1, 3}, {3}), 2.0);
  EXPECT_EQ(bools(ops::logical_and(m, n)), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(bools(ops::logical_or(m, n)), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(bools(ops::logical_xor(m, n)), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bools(ops::eq(m, 1.0)), bools(m));
}

TEST(Compare, BadInputIsAnErrorNamingTheOp) {
  const Tensor x = f32({1, 2, 3}, {3});
  expect_error([&] { ops::lt(x, f32({1, 2}, {2})); }, {"lt", "[3]", "[2]"});
  expect_error([&] { ops::eq(x, x.to(DType::f64)); }, {"eq", "f32", "f64"});
  const Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  expect_error([&] { ops::gt(i, 0.5); }, {"gt", "integral scalar", "0.5"});
  expect_error([&] { ops::eq(ops::gt(x, 1.0), 2.0); }, {"eq", "bool", "0 or 1"});
  expect_error([&] { ops::logical_and(x, ops::gt(x, 1.0)); }, {"logical_and", "bool", "f32"});
}

// The comparison kernel at every capability and on the CUDA simulator
// (in order and reversed) gives the scalar build's bits.
TEST(Compare, SameBitsAtEveryCapabilityAndOnTheCudaSimulator) {
  const Tensor a = uniform({37, 19}, -1, 1, 5, DType::f32);
  const Tensor b = ops::transpose(uniform({19, 37}, -1, 1, 6, DType::f32), 0, 1);  // strided
  std::vector<Tensor> reference;
  const auto all = [&] {
    std::vector<Tensor> out;
    for (CompareOp op : kCompareOps) out.push_back(ops::compare(op, a, b));
    out.push_back(ops::compare(CompareOp::le, a, 0.25));
    return out;
  };
  const auto check = [&](const std::vector<Tensor>& got, const std::string& where) {
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], reference[i])) << where;
  };
  for_each_capability([&](CpuCapability cap) {
    if (cap == CpuCapability::scalar) {
      reference = all();
      return;
    }
    check(all(), to_string(cap));
  });
  CudaSimBackend in_order(false), reversed(true);
  for (CudaSimBackend* sim : {&in_order, &reversed}) {
    ScopedCpuBackend use(*sim);
    check(all(), sim->name());
  }
}

TEST(WhereAndMaskedFill, ScalarsOnEitherSideAndTheirGradients) {
  const Tensor x = f32({1, -2, 3, -4}, {2, 2}).requires_grad(true);
  const Tensor mask = ops::lt(x, 0.0);
  const Tensor y = ops::masked_fill(x, mask, -1e9);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, -1e9f, 3, -1e9f}));
  EXPECT_EQ(ops::where(mask, 7.0, x).to_vector<float>(), (std::vector<float>{1, 7, 3, 7}));
  EXPECT_EQ(ops::where(mask, x, 0.0).to_vector<float>(), (std::vector<float>{0, -2, 0, -4}));
  EXPECT_TRUE(
      gradcheck([](const Inputs& in) { return ops::masked_fill(in[0], ops::gt(in[0], 0.2), 0.5); },
                {param({4, 5}, 3)}));
  expect_error(
      [&] {
        ops::masked_fill(x, ops::lt(f32({1, 2, 3}, {3}), 0.0), 0.0);
      },
      {"masked_fill", "[2, 2]", "[3]"});
  // A mask that broadcasts, but to more than x's shape.
  expect_error(
      [&] {
        ops::masked_fill(x, ops::lt(Tensor::zeros({3, 2, 2}), 0.0), 0.0);
      },
      {"masked_fill", "does not broadcast to x"});
}

TEST(Clamp, AsTorchsIncludingNanAndCrossedBounds) {
  const Tensor x = f32({-2, -0.5f, 0.25f, 3, float(kNan)}, {5});
  EXPECT_EQ(ops::clamp(x, -1.0, 1.0).to_vector<float>()[0], -1.0f);
  const std::vector<float> c = ops::clamp(x, -1.0, 1.0).to_vector<float>();
  EXPECT_EQ(std::vector<float>(c.begin(), c.end() - 1), (std::vector<float>{-1, -0.5f, 0.25f, 1}));
  EXPECT_TRUE(std::isnan(c.back()));
  // min > max: max everywhere but the NaN.
  EXPECT_EQ(ops::clamp(x, 2.0, 1.0).to_vector<float>()[1], 1.0f);
  EXPECT_EQ(ops::clamp(x, std::nullopt, 0.0).to_vector<float>()[2], 0.0f);
  expect_error([&] { ops::clamp(x, std::nullopt, std::nullopt); }, {"clamp", "neither"});
  expect_error([&] { ops::clamp(x, f32({1, 2}, {2}), Tensor()); }, {"clamp"});
  // Gradients at the bounds themselves: x keeps it (torch's >= and <=).
  const Tensor at = f32({-1, 1}, {2}).requires_grad(true);
  autograd::backward(ops::sum(ops::clamp(at, -1.0, 1.0)));
  EXPECT_EQ(at.grad().to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(MinimumMaximum, TiesShareTheGradientAndNanWins) {
  const Tensor a = f32({1, 5, 2, float(kNan)}, {4}).requires_grad(true);
  const Tensor b = f32({3, 5, 1, 0}, {4}).requires_grad(true);
  const Tensor hi = ops::maximum(a, b);
  const std::vector<float> v = hi.to_vector<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end() - 1), (std::vector<float>{3, 5, 2}));
  EXPECT_TRUE(std::isnan(v.back()));
  autograd::backward(ops::sum(ops::where(ops::isnan(hi), 0.0, hi)));
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 0}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{1, 0.5f, 0, 0}));
  EXPECT_EQ(ops::minimum(a.detach(), b.detach()).to_vector<float>()[0], 1.0f);
}

TEST(ComposedReductions, ValuesAsTorchGivesThem) {
  // x: [[1, 7, 3], [4, -2, 7]]
  const Tensor x = f32({1, 7, 3, 4, -2, 7}, {2, 3});
  EXPECT_EQ(ops::amax(x).item<float>(), 7.0f);
  EXPECT_EQ(ops::amin(x).item<float>(), -2.0f);
  EXPECT_EQ(ops::amax(x, {1}).to_vector<float>(), (std::vector<float>{7, 7}));
  EXPECT_EQ(ops::amin(x, {0}, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(ops::argmax(x).item<int64_t>(), 1);  // the first 7, flattened
  EXPECT_EQ(ops::argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ops::argmin(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(ops::argmax(x, std::nullopt, true).shape(), (Shape{1, 1}));
  const ops::MaxResult m = ops::min(x, 1);
  EXPECT_EQ(m.values.to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));

  const Tensor d = x.to(DType::f64);
  const std::vector<double> lse = ops::logsumexp(d, {1}).to_vector<double>();
  EXPECT_NEAR(lse[0], std::log(std::exp(1.0) + std::exp(7.0) + std::exp(3.0)), 1e-12);
  EXPECT_NEAR(lse[1], std::log(std::exp(4.0) + std::exp(-2.0) + std::exp(7.0)), 1e-12);
  // No overflow, and -inf rows stay -inf.
  const Tensor big = Tensor::from_vector(std::vector<double>{1000, 1000, -kInf, -kInf}, {2, 2});
  const std::vector<double> b = ops::logsumexp(big, {-1}).to_vector<double>();
  EXPECT_NEAR(b[0], 1000 + std::log(2.0), 1e-9);
  EXPECT_EQ(b[1], -kInf);

  // var of [1, 7, 3] is ((1-11/3)^2 + (7-11/3)^2 + (3-11/3)^2) / 2 = 28/3.
  EXPECT_NEAR(ops::var(d, {1}).to_vector<double>()[0], 28.0 / 3.0, 1e-12);
  EXPECT_NEAR(ops::var(d, {1}, 0).to_vector<double>()[0], 28.0 / 4.5, 1e-12);
  EXPECT_NEAR(ops::std(d).item<double>(), std::sqrt(ops::var(d).item<double>()), 1e-15);
}

TEST(ComposedReductions, GradientsInF64) {
  const auto check = [](const OpFn& f) { EXPECT_TRUE(gradcheck(f, {param({3, 4, 5}, 9)})); };
  check([](const Inputs& in) { return ops::amax(in[0], {0, 2}); });
  check([](const Inputs& in) { return ops::amin(in[0], {}, true); });
  check([](const Inputs& in) { return ops::min(in[0], 1).values; });
  check([](const Inputs& in) { return ops::logsumexp(in[0], {-1}); });
  check([](const Inputs& in) { return ops::logsumexp(in[0], {0, 1}, true); });
  check([](const Inputs& in) { return ops::var(in[0], {1}); });
  check([](const Inputs& in) { return ops::std(in[0], {0, 2}, 0, true); });
}

TEST(ComposedReductions, BadInputIsAnError) {
  const Tensor x = f32({1, 2, 3}, {3});
  expect_error([&] { ops::amax(x, {1}); }, {"amax", "dim"});
  expect_error([&] { ops::argmax(Tensor::zeros({0})); }, {"argmax", "empty"});
  expect_error([&] { ops::var(x, {0, 0}); }, {"var", "repeated dim"});
  expect_error([&] { ops::logsumexp(Tensor::arange(3), {0}); }, {"logsumexp", "i64"});
}

}  // namespace
}  // namespace reprise::testing
