// ops::swiglu: bitwise equality with silu(gate) * up (values and both
// gradients), what it saves and bad input. Its cases are in
// tests/cases/swiglu.cpp.
#include "ops/swiglu.h"

#include <array>

#include "autograd/backward.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/capabilities.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

struct Result {
  std::vector<float> y, dgate, dup;
};

// y = f(gate, up) and the gradients of sum(y * w) for a fixed weighting w.
template <class F>
Result run(F f, const Tensor& gate_in, const Tensor& up_in, const Tensor& w) {
  Tensor gate = gate_in.detach().requires_grad(true), up = up_in.detach().requires_grad(true);
  Tensor y = f(gate, up);
  autograd::backward(ops::sum(ops::mul(y, w)));
  return {y.to_vector<float>(), gate.grad().to_vector<float>(), up.grad().to_vector<float>()};
}

TEST(Swiglu, BitwiseEqualToSiluTimesUp) {
  // The MLP's shape, large enough to be split across threads; gate values
  // reach the sigmoid's tails.
  const Shape shape{8, 64, 688};
  Tensor gate = uniform(shape, -12, 12, 65, DType::f32), up = uniform(shape, -2, 2, 66, DType::f32);
  Tensor w = uniform(shape, -1, 1, 67, DType::f32);
  auto two_ops = [](const Tensor& g, const Tensor& u) { return ops::mul(ops::silu(g), u); };
  auto fused = [](const Tensor& g, const Tensor& u) { return ops::swiglu(g, u); };
  Result want = run(two_ops, gate, up, w), got = run(fused, gate, up, w);
  EXPECT_EQ(got.y, want.y);
  EXPECT_EQ(got.dgate, want.dgate);
  EXPECT_EQ(got.dup, want.dup);
}

// On bf16 operands each value and gradient is the f32 one of the widened
// operands rounded once to bf16, bit for bit, at every capability, in
// vectors of 16 and the tail past them, contiguous or transposed.
TEST(Swiglu, Bf16IsTheF32ResultRoundedOnce) {
  const Tensor gate = ops::cast(uniform({37, 29}, -12, 12, 70, DType::f32), DType::bf16);
  const Tensor up = ops::cast(uniform({37, 29}, -2, 2, 71, DType::f32), DType::bf16);
  const Tensor dy = ops::cast(uniform({37, 29}, -1, 1, 72, DType::f32), DType::bf16);
  auto grads = [&](const Tensor& g_in, const Tensor& u_in, const Tensor& d) {
    Tensor g = g_in.detach().requires_grad(true), u = u_in.detach().requires_grad(true);
    Tensor y = ops::swiglu(g, u);
    autograd::backward(y, d);
    return std::array<Tensor, 3>{y, g.grad(), u.grad()};
  };
  const auto wide = [](const Tensor& t) { return ops::cast(t, DType::f32); };
  const std::array<Tensor, 3> f32 = grads(wide(gate), wide(up), wide(dy));
  for_each_capability([&](CpuCapability c) {
    const std::array<Tensor, 3> got = grads(gate, up, dy);
    const Tensor gate_t = gate.transpose(0, 1).contiguous().transpose(0, 1);
    const std::array<Tensor, 3> strided = grads(gate_t, up, dy);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(got[i].dtype(), DType::bf16);
      EXPECT_TRUE(same_bits(got[i], ops::cast(f32[i], DType::bf16))) << i << ", " << to_string(c);
      EXPECT_TRUE(same_bits(strided[i], got[i])) << i << ", " << to_string(c);
    }
  });
}

TEST(Swiglu, SavesOnlyItsInputs) {
  Tensor gate = param({4, 8}, 68), up = param({4, 8}, 69);
  Tensor y = ops::swiglu(gate, up);
  ASSERT_NE(y.grad_fn(), nullptr);
  const auto& saved = y.grad_fn()->saved;
  ASSERT_EQ(saved.size(), 2u);  // the two-op form also keeps silu(gate)
  EXPECT_EQ(saved[0].value().data<double>(), gate.data<double>());
  EXPECT_EQ(saved[1].value().data<double>(), up.data<double>());
}

TEST(Swiglu, BadInputIsAClearError) {
  Tensor a = Tensor::zeros({3, 5}), b = Tensor::zeros({3, 4});
  expect_error([&] { ops::swiglu(a, b); }, {"swiglu", "[3, 5]", "[3, 4]", "same shape"});
  expect_error(
      [&] {
        ops::swiglu(a, Tensor::zeros({3, 5}, DType::f64));
      },
      {"swiglu", "dtype", "f32", "f64"});
  Tensor i = Tensor::zeros({3, 5}, DType::i32);
  expect_error([&] { ops::swiglu(i, i); }, {"swiglu", "f32, f64 or bf16", "i32"});
}

}  // namespace
}  // namespace reprise::testing
