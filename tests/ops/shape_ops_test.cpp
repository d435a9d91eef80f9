// cat, split, stack: forward values, views and bad input. Their cases are in
// tests/cases/shape.cpp.
#include "autograd/backward.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using reprise::Tensor;

TEST(ShapeOps, CatValues) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({5, 6}, {2, 1});
  EXPECT_EQ(ops::cat({a, b}, 1).to_vector<float>(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(ops::cat({a, b.transpose(0, 1)}, 0).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Integer tensors and empty pieces.
  Tensor i = Tensor::from_vector<int64_t>({7, 8}, {2});
  Tensor none = Tensor::zeros({0}, DType::i64);
  Tensor c = ops::cat({i, none, i}, 0);
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 7, 8}));
  EXPECT_FALSE(c.requires_grad());
}

TEST(ShapeOps, SplitGivesViewsAndZeroGradForUnusedPieces) {
  Tensor x =
      Tensor::from_vector<double>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 5}).requires_grad(true);
  std::vector<Tensor> p = ops::split(x, 2, 1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(p[2].shape(), (Shape{2, 1}));
  EXPECT_EQ(p[1].detach().to_vector<double>(), (std::vector<double>{2, 3, 7, 8}));
  EXPECT_EQ(p[2].detach().to_vector<double>(), (std::vector<double>{4, 9}));
  for (const Tensor& t : p) EXPECT_EQ(t.storage(), x.storage());  // no copy
  autograd::backward(ops::sum(ops::mul(p[1], 3.0)));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 3, 3, 0, 0, 0, 3, 3, 0}));
  // A one-element list means sizes, not a chunk size.
  EXPECT_EQ(ops::split(x.detach(), {5}, 1).size(), 1u);
  EXPECT_EQ(ops::split(x.detach(), std::vector<int64_t>{1, 0, 4}, 1)[1].shape(), (Shape{2, 0}));
}

TEST(ShapeOps, StackValues) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor b = Tensor::from_vector<float>({4, 5, 6}, {3});
  Tensor s0 = ops::stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(s0.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor s1 = ops::stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(s1.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor scalars = ops::stack({Tensor::scalar(1.5), Tensor::scalar(2.5)}, 0);
  EXPECT_EQ(scalars.to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
}

TEST(ShapeOps, BadInputNamesOpAndShapes) {
  Tensor a = Tensor::zeros({3, 5});
  expect_error([&] { ops::cat({a, Tensor::zeros({4, 4})}, 0); }, {"cat", "[3, 5]", "[4, 4]"});
  expect_error(
      [&] {
        ops::cat({a, Tensor::zeros({3, 5}, DType::f64)}, 0);
      },
      {"cat", "f32[3, 5]", "f64[3, 5]"});
  expect_error([&] { ops::cat({a, Tensor::zeros({3})}, 0); }, {"cat", "rank", "f32[3]"});
  expect_error([&] { ops::cat({}, 0); }, {"cat", "at least one"});
  expect_error([&] { ops::cat({a}, 2); }, {"cat", "dim 2", "f32[3, 5]"});
  expect_error([&] { ops::split(a, {2, 2}, 1); }, {"split", "[2, 2]", "sum to 4", "f32[3, 5]"});
  expect_error([&] { ops::split(a, {6, -1}, 1); }, {"split", "negative size -1"});
  expect_error([&] { ops::split(a, 0, 1); }, {"split", "split_size", "f32[3, 5]"});
  expect_error([&] { ops::split(a, 2, 3); }, {"split", "dim 3", "f32[3, 5]"});
  expect_error([&] { ops::stack({a, Tensor::zeros({5, 3})}, 0); }, {"stack", "[3, 5]", "[5, 3]"});
  expect_error([&] { ops::stack({a, a}, 3); }, {"stack", "dim 3", "f32[3, 5]"});
}

}  // namespace
}  // namespace reprise::testing
