// matmul, linear and grouped_linear with bf16 and f16 operands: each
// element is the 16-bit product's definition, bit for bit, forward and
// backward, in any layout (f16: the f32 product of the exactly widened
// operands rounded once; bf16: the paired chain of cpu/gemm_bf16.cpp);
// gradients keep the operands' dtype; 16-bit gradients accumulate in f32
// and round once (engine/accumulate.h, autograd/backward.h).
#include <gtest/gtest.h>

#include "autograd/backward.h"
#include "engine/accumulate.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/grouped_linear.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/views.h"
#include "tests/support/bf16_product.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

Tensor wide(const Tensor& t) { return ops::cast(t, DType::f32); }

// a @ b by the definition of the 16-bit product in a's dtype.
Tensor product_16bit(const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::bf16) return bf16_reference_product(a, b);
  return ops::cast(ops::matmul(wide(a), wide(b)), a.dtype());
}

class Matmul16 : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GetParam() == DType::bf16 && !kHaveBf16Reference)
      GTEST_SKIP() << "the bf16 reference sets the x86 FPU's flush modes";
  }
};

TEST_P(Matmul16, ProductIsItsDefinition) {
  const DType dt = GetParam();
  const Tensor a = random16({3, 33, 70}, dt, 1), b = random16({70, 45}, dt, 2);
  const Tensor expected = product_16bit(a, b);
  const Tensor y = ops::matmul(a, b);
  EXPECT_EQ(y.dtype(), dt);
  EXPECT_TRUE(same_bits(y, expected));
  // Transposed operands, read as views.
  const Tensor at = a.transpose(1, 2).contiguous().transpose(1, 2);
  const Tensor bt = b.transpose(0, 1).contiguous().transpose(0, 1);
  EXPECT_TRUE(same_bits(ops::matmul(at, bt), expected));
  // The product is not the f32 one: the rounding happened.
  EXPECT_FALSE(same_bits(wide(y), ops::matmul(wide(a), wide(b))));
}

TEST_P(Matmul16, LinearGradientsAreTheirProductsDefinitions) {
  const DType dt = GetParam();
  Tensor x = random16({4, 6, 24}, dt, 3).requires_grad(true);
  Tensor w = random16({10, 24}, dt, 4).requires_grad(true);
  const Tensor gy = random16({4, 6, 10}, dt, 5);
  const Tensor y = ops::linear(x, w);  // (4, 6, 10)
  ASSERT_EQ(y.dtype(), dt);
  autograd::backward(y, gy);
  ASSERT_EQ(x.grad().dtype(), dt);
  ASSERT_EQ(w.grad().dtype(), dt);
  const Tensor dx = product_16bit(gy, w);  // (4, 6, 24)
  const Tensor dw = product_16bit(ops::transpose(ops::reshape(gy, {-1, 10}), 0, 1),
                                  ops::reshape(x.detach(), {-1, 24}));  // (10, 24)
  EXPECT_TRUE(same_bits(x.grad(), dx));
  EXPECT_TRUE(same_bits(w.grad(), dw));
}

TEST_P(Matmul16, GroupedLinearIsOneRoundedProductPerBlock) {
  const DType dt = GetParam();
  const Tensor x = random16({9, 16}, dt, 6);
  const std::vector<Tensor> ws{random16({8, 16}, dt, 7), random16({8, 16}, dt, 8)};
  const Tensor counts = Tensor::from_vector(std::vector<int64_t>{4, 5}, {2});
  const Tensor y = ops::grouped_linear(x, counts, ws);  // (9, 8)
  ASSERT_EQ(y.dtype(), dt);
  EXPECT_TRUE(same_bits(y.slice(0, 0, 4), ops::linear(x.slice(0, 0, 4), ws[0])));
  EXPECT_TRUE(same_bits(y.slice(0, 4, 9), ops::linear(x.slice(0, 4, 9), ws[1])));
}

TEST_P(Matmul16, GradientsAccumulateInF32AndRoundOnce) {
  const DType dt = GetParam();
  const Tensor a = random16({5, 7}, dt, 9), b = random16({5, 7}, dt, 10);
  const Tensor expected = ops::cast(ops::add(wide(a), wide(b)), dt);
  EXPECT_TRUE(same_bits(sum_of(a, b), expected));
  Tensor acc = a.clone();
  accumulate_(acc, b);
  EXPECT_TRUE(same_bits(acc, expected));
  // A 16-bit tensor read twice gets the sum of both gradients.
  Tensor x = random16({3, 8}, dt, 11).requires_grad(true);
  const Tensor w1 = random16({4, 8}, dt, 12), w2 = random16({4, 8}, dt, 13);
  const Tensor g = random16({3, 4}, dt, 14);
  autograd::backward(ops::add(wide(ops::linear(x, w1)), wide(ops::linear(x, w2))), wide(g));
  const Tensor d1 = ops::linear(g, ops::transpose(w1, 0, 1).contiguous()),
               d2 = ops::linear(g, ops::transpose(w2, 0, 1).contiguous());
  EXPECT_TRUE(same_bits(x.grad(), sum_of(d1, d2)));
}

// A 16-bit copy of an f32 tensor read by two products hands the f32 sum of
// their gradients to the cast, unrounded: what two separate casts give.
TEST_P(Matmul16, ASharedCastGetsTheF32SumOfItsGradients) {
  const DType dt = GetParam();
  Tensor x = uniform({16, 8}, -2, 2, 15, DType::f32).requires_grad(true);
  const Tensor w1 = random16({4, 8}, dt, 16), w2 = random16({4, 8}, dt, 17);
  const Tensor g = random16({16, 4}, dt, 18);
  const Tensor x16 = ops::cast(x, dt);
  autograd::backward(ops::add(wide(ops::linear(x16, w1)), wide(ops::linear(x16, w2))), wide(g));
  const Tensor d1 = ops::linear(g, ops::transpose(w1, 0, 1).contiguous()),
               d2 = ops::linear(g, ops::transpose(w2, 0, 1).contiguous());
  EXPECT_TRUE(same_bits(x.grad(), ops::add(wide(d1), wide(d2))));
  EXPECT_FALSE(same_bits(x.grad(), wide(sum_of(d1, d2))));  // the rounding it avoids
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Matmul16, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Matmul16, MixedDtypesAreRefused) {
  expect_error(
      [] {
        ops::linear(Tensor::zeros({2, 5}, DType::bf16), Tensor::zeros({4, 5}));
      },
      {"linear", "bf16[2, 5]", "f32[4, 5]"});
  expect_error(
      [] {
        ops::matmul(Tensor::zeros({2, 5}), Tensor::zeros({5, 4}, DType::f16));
      },
      {"matmul", "f32[2, 5]", "f16[5, 4]"});
}

}  // namespace
}  // namespace reprise::testing
