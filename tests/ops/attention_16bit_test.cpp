// scaled_dot_product_attention on bf16 and f16 q, k, v, on the CPU: the f32
// kernel on the exactly widened inputs, the output and the gradients
// rounded once to the 16-bit dtype, bit for bit, with a causal mask, grouped
// kv heads and dropout (the CPU's mask bits for the same reservation); the
// op records it like f32 attention, gradients in the inputs' dtype.
#include <gtest/gtest.h>

#include <utility>

#include "autograd/backward.h"
#include "engine/backend.h"
#include "ops/attention.h"
#include "ops/cast.h"
#include "rng/generator.h"
#include "tests/support/bf16_product.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

class Attention16 : public ::testing::TestWithParam<DType> {};

TEST_P(Attention16, IsTheF32KernelOnTheWidenedInputsRoundedOnce) {
  const DType dt = GetParam(), f32 = DType::f32;
  Backend& cpu = cpu_backend();
  const Tensor q = random16({2, 4, 24, 16}, dt, 1), k = random16({2, 2, 24, 16}, dt, 2),
               v = random16({2, 2, 24, 8}, dt, 3), dout = random16({2, 4, 24, 8}, dt, 4);
  AttentionParams params{.scale = 0.25, .causal = true};
  for (bool dropout : {false, true}) {
    SCOPED_TRACE(dropout);
    if (dropout) {
      params.dropout = AttentionDropout{
          .words = {.seed = 3, .subsequence = 1, .offset = 0, .count = 1 << 20}, .p = 0.25};
    }
    const Tensors got = cpu.sdpa(q, k, v, params);
    const Tensors wide = cpu.sdpa(q.to(f32), k.to(f32), v.to(f32), params);
    EXPECT_TRUE(same_bits(got[0], wide[0].to(dt)));
    EXPECT_TRUE(same_bits(got[1], wide[1]));  // lse stays f32
    // Every gradient, and without dq or dk (k and v then packed for fewer
    // products).
    for (const auto& [need_dq, need_dk] : {std::pair{true, true}, {false, true}, {true, false}}) {
      const Tensors grads =
          cpu.sdpa_backward(q, k, v, got[0], got[1], dout, params, need_dq, need_dk);
      const Tensors wide_grads = cpu.sdpa_backward(q.to(f32), k.to(f32), v.to(f32), got[0].to(f32),
                                                   got[1], dout.to(f32), params, need_dq, need_dk);
      for (size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(grads[i].defined(), wide_grads[i].defined()) << i;
        if (grads[i].defined()) {
          EXPECT_TRUE(same_bits(grads[i], wide_grads[i].to(dt))) << i;
        }
      }
    }
  }
}

TEST_P(Attention16, TheOpRecordsItWithGradientsInTheInputsDtype) {
  const DType dt = GetParam();
  Tensor q = random16({1, 2, 16, 8}, dt, 5).requires_grad(true);
  Tensor k = random16({1, 1, 16, 8}, dt, 6).requires_grad(true);
  Tensor v = random16({1, 1, 16, 8}, dt, 7).requires_grad(true);
  rng::Generator gen(9);
  const Tensor out = ops::scaled_dot_product_attention(
      q, k, v, {.causal = true, .dropout_p = 0.2, .generator = &gen});
  ASSERT_EQ(out.dtype(), dt);
  const autograd::Node& node = *out.grad_fn();
  NoGradGuard no_grad;
  EXPECT_TRUE(same_bits(node.forward({q, k, v}, &*node.rng)[0], out));  // replay
  const autograd::Tensors g = autograd::grad({out}, {q, k, v}, {random16({1, 2, 16, 8}, dt, 8)});
  for (const Tensor& t : g) EXPECT_EQ(t.dtype(), dt);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Attention16, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace reprise::testing
