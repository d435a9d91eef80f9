// einsum (ops/einsum.h): each form against the ops it stands for, or
// against sums written out by hand, in f64; its gradients by finite
// differences (it is composed of recorded ops); and bad equations.
#include "ops/einsum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/grad_mode.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

::testing::AssertionResult close(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << to_string(got.shape()) << " != " << to_string(want.shape());
  }
  NoGradGuard no_grad;
  const std::vector<double> g = got.to(DType::f64).to_vector<double>();
  const std::vector<double> w = want.to(DType::f64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::abs(g[i] - w[i]) > 1e-12 * (1 + std::abs(w[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " != " << w[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Einsum, MatchesTheOpsItStandsFor) {
  const Tensor a = param({3, 4}, 1), b = param({4, 5}, 2);
  EXPECT_TRUE(close(ops::einsum("ij,jk->ik", {a, b}), ops::matmul(a, b)));
  EXPECT_TRUE(close(ops::einsum("ij,jk", {a, b}), ops::matmul(a, b)));  // implicit output
  EXPECT_TRUE(close(ops::einsum("ij,kj->ik", {a, ops::transpose(b, 0, 1)}), ops::matmul(a, b)));
  EXPECT_TRUE(close(ops::einsum("ij->ji", {a}), ops::transpose(a, 0, 1)));
  EXPECT_TRUE(close(ops::einsum("ij->", {a}), ops::sum(a)));
  EXPECT_TRUE(close(ops::einsum("ij->j", {a}), ops::sum(a, {0})));
  // Attention scores and their product with v, batch and head as batch.
  const Tensor q = param({2, 3, 5, 4}, 3), k = param({2, 3, 6, 4}, 4), v = param({2, 3, 6, 4}, 5);
  const Tensor scores = ops::einsum("bhqd,bhkd->bhqk", {q, k});
  EXPECT_TRUE(close(scores, ops::matmul(q, ops::transpose(k, 2, 3))));
  EXPECT_TRUE(close(ops::einsum("bhqk,bhkd->bhqd", {scores, v}), ops::matmul(scores, v)));
  // "..." for the leading dims.
  EXPECT_TRUE(close(ops::einsum("...qd,...kd->...qk", {q, k}), scores));
  EXPECT_TRUE(close(ops::einsum("...d,...d->...", {q, q}), ops::sum(ops::mul(q, q), {-1})));
}

TEST(Einsum, MatchesSumsWrittenOut) {
  // Outer product, a broadcast size-1 dim, and three operands.
  const Tensor x = param({3}, 6), y = param({4}, 7);
  const Tensor outer = ops::einsum("i,j->ij", {x, y});
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  std::vector<double> want;
  for (double xi : xv)
    for (double yj : yv) want.push_back(xi * yj);
  EXPECT_TRUE(close(outer, Tensor::from_vector(want, {3, 4})));

  const Tensor a = param({2, 1, 3}, 8), b = param({2, 4, 3}, 9), c = param({3, 5}, 10);
  const Tensor got = ops::einsum("bij,bjk,kl->bil", {param({2, 4, 4}, 11), b, c});
  const std::vector<double> p = param({2, 4, 4}, 11).to_vector<double>(),
                            bv = b.to_vector<double>(), cv = c.to_vector<double>();
  std::vector<double> ref(2 * 4 * 5, 0.0);
  for (int bb = 0; bb < 2; ++bb)
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 5; ++l) {
        double s = 0;
        for (int j = 0; j < 4; ++j)
          for (int kk = 0; kk < 3; ++kk)
            s += p[size_t((bb * 4 + i) * 4 + j)] * bv[size_t((bb * 4 + j) * 3 + kk)] *
                 cv[size_t(kk * 5 + l)];
        ref[size_t((bb * 4 + i) * 5 + l)] = s;
      }
  EXPECT_TRUE(close(got, Tensor::from_vector(ref, {2, 4, 5})));

  // a's j of size 1 broadcasts against b's 4.
  const Tensor broadcast = ops::einsum("bjc,bjc->bc", {a, b});
  EXPECT_TRUE(close(broadcast, ops::sum(ops::mul(a, b), {1})));
}

TEST(Einsum, GradientsOfItsForms) {
  EXPECT_TRUE(gradcheck(
      [](const Inputs& in) {
        return ops::einsum("bhqd,bhkd->bhqk", {in[0], in[1]});
      },
      {param({2, 2, 3, 4}, 12), param({2, 2, 5, 4}, 13)}));
  EXPECT_TRUE(gradcheck(
      [](const Inputs& in) {
        return ops::einsum("ij,jk,k->i", {in[0], in[1], in[2]});
      },
      {param({3, 4}, 14), param({4, 5}, 15), param({5}, 16)}));
  EXPECT_TRUE(gradcheck(
      [](const Inputs& in) {
        return ops::einsum("bjc,bjc->bc", {in[0], in[1]});
      },
      {param({2, 1, 3}, 17), param({2, 4, 3}, 18)}));
}

TEST(Einsum, RejectsBadEquations) {
  const Tensor a = param({3, 4}, 1);
  expect_error([&] { ops::einsum("ij,jk->ik", {a}); }, {"einsum", "2 subscripts for 1 operands"});
  expect_error([&] { ops::einsum("ijk->i", {a}); }, {"einsum", "operand 0", "2 dims", "3 letters"});
  expect_error(
      [&] {
        ops::einsum("ii->i", {param({3, 3}, 2)});
      },
      {"einsum", "repeats", "diagonal"});
  expect_error(
      [&] {
        ops::einsum("ij,jk->ik", {a, param({5, 2}, 3)});
      },
      {"einsum", "subscript j", "size 4", "size 5"});
  expect_error([&] { ops::einsum("ij->iz", {a}); }, {"einsum", "output subscript z", "no operand"});
  expect_error([&] { ops::einsum("i1->i", {param({3, 1}, 4)}); }, {"einsum", "'1'"});
  expect_error(
      [&] {
        ops::einsum("ij,jk->ik", {a, param({4, 2}, 5).to(DType::i64)});
      },
      {"einsum", "floating dtype", "i64"});
}

}  // namespace
}  // namespace reprise::testing
