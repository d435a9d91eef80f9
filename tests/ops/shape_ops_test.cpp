// cat, split, stack: gradcheck cases, forward values, views and bad input.
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

const RegisterOpCases shape_cases({
    {"cat/3x5x7+3x2x7_dim1",
     [] {
       return Inputs{param({3, 5, 7}, 51), param({3, 2, 7}, 52)};
     },
     [](const Inputs& in) {
       return ops::cat({in[0], in[1]}, 1);
     }},
    // Three inputs along the last dim, one of them a transposed view and
    // one used twice (its gradient is the sum of two slices).
    {"cat/last_dim_views_repeat",
     [] {
       return Inputs{param({3, 5}, 53), param({5, 3}, 54)};
     },
     [](const Inputs& in) {
       Tensor t = ops::transpose(in[1], 0, 1);
       return ops::tanh(ops::cat({in[0], t, in[0]}, -1));
     }},
    // Pieces 0 and 2 used, piece 1 not: its part of dx must be zero.
    {"split/sizes_2_3_2_dim2",
     [] {
       return Inputs{param({3, 5, 7}, 55)};
     },
     [](const Inputs& in) {
       std::vector<Tensor> p = ops::split(in[0], {2, 3, 2}, 2);
       return ops::cat({ops::mul(p[0], p[0]), ops::exp(p[2])}, 2);
     }},
    // Chunks of 2 over a dim of 5: sizes 2, 2, 1.
    {"split/chunk2_of_5",
     [] {
       return Inputs{param({3, 5, 7}, 56)};
     },
     [](const Inputs& in) {
       std::vector<Tensor> p = ops::split(in[0], 2, 1);
       return ops::cat({ops::sigmoid(p[2]), ops::mul(p[0], p[1])}, 1);
     }},
    {"stack/dim1_repeat",
     [] {
       return Inputs{param({3, 5}, 57), param({3, 5}, 58)};
     },
     [](const Inputs& in) {
       return ops::tanh(ops::stack({in[0], in[1], in[0]}, 1));
     }},
    {"stack/dim_last_3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 59), param({3, 5, 7}, 60)};
     },
     [](const Inputs& in) {
       return ops::stack({in[0], in[1]}, -1);
     }},
});

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
