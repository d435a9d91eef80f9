// ops::gated_delta_rule against the recurrence written out in f64, its
// state carried across calls bit for bit (decode equals one call over the
// sequence), and bad input. The gradient check, the CPU capabilities and
// the CUDA simulator run its cases in tests/cases/delta_rule.cpp.
#include "ops/delta_rule.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/grad_mode.h"
#include "tests/cases/inputs.h"
#include "tests/support/expect_error.h"

namespace reprise::ops {
namespace {

using testing::expect_error;
using testing::uniform;

struct Inputs {
  Tensor q, k, v, decay, beta;
};

Inputs inputs(int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, DType dtype, uint64_t seed) {
  return {uniform({B, T, H, K}, -1, 1, seed, dtype), uniform({B, T, H, K}, -1, 1, seed + 1, dtype),
          uniform({B, T, H, V}, -1, 1, seed + 2, dtype),
          uniform({B, T, H}, 0.8, 1, seed + 3, dtype), uniform({B, T, H}, 0, 1, seed + 4, dtype)};
}

// The recurrence of ops/delta_rule.h, element by element in f64.
std::vector<double> reference(const Inputs& in) {
  const int64_t B = in.q.size(0), T = in.q.size(1), H = in.q.size(2), K = in.q.size(3),
                V = in.v.size(3);
  const auto q = in.q.to_vector<double>(), k = in.k.to_vector<double>(),
             v = in.v.to_vector<double>(), a = in.decay.to_vector<double>(),
             beta = in.beta.to_vector<double>();
  std::vector<double> out(size_t(B * T * H * V));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> S(size_t(K * V), 0.0);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t g = (b * T + t) * H + h;
        for (double& s : S) s *= a[size_t(g)];
        for (int64_t j = 0; j < V; ++j) {
          double m = 0;
          for (int64_t i = 0; i < K; ++i) m += S[size_t(i * V + j)] * k[size_t(g * K + i)];
          const double d = (v[size_t(g * V + j)] - m) * beta[size_t(g)];
          for (int64_t i = 0; i < K; ++i) S[size_t(i * V + j)] += k[size_t(g * K + i)] * d;
        }
        for (int64_t j = 0; j < V; ++j) {
          double o = 0;
          for (int64_t i = 0; i < K; ++i) o += S[size_t(i * V + j)] * q[size_t(g * K + i)];
          out[size_t(g * V + j)] = o;
        }
      }
    }
  }
  return out;
}

TEST(GatedDeltaRule, IsTheRecurrence) {
  const Inputs in = inputs(2, 70, 3, 4, 5, DType::f64, 1);
  const std::vector<double> want = reference(in);
  const std::vector<double> got =
      gated_delta_rule(in.q, in.k, in.v, in.decay, in.beta).out.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

// A sequence fed in pieces, each from the state the last left, gives the
// bits of one call over all of it: what decoding from a cache relies on.
TEST(GatedDeltaRule, PiecesFromTheStateGiveOneCallsBits) {
  const int64_t T = 150;
  const Inputs in = inputs(2, T, 2, 8, 6, DType::f32, 11);
  const DeltaRuleResult whole = gated_delta_rule(in.q, in.k, in.v, in.decay, in.beta);
  Tensor state;
  int64_t at = 0;
  for (int64_t len : {1, 63, 2, 70, 1, 13}) {
    auto part = [&](const Tensor& t) { return t.slice(1, at, at + len).contiguous(); };
    const DeltaRuleResult r =
        gated_delta_rule(part(in.q), part(in.k), part(in.v), part(in.decay), part(in.beta), state);
    EXPECT_EQ(r.out.to_vector<float>(), part(whole.out).to_vector<float>()) << "from " << at;
    state = r.state;
    at += len;
  }
  ASSERT_EQ(at, T);
  EXPECT_EQ(state.to_vector<float>(), whole.state.to_vector<float>());
}

TEST(GatedDeltaRule, NoPositionsLeaveTheState) {
  const Inputs in = inputs(1, 0, 2, 3, 4, DType::f32, 21);
  const Tensor state = uniform({1, 2, 3, 4}, -1, 1, 26, DType::f32);
  const DeltaRuleResult r = gated_delta_rule(in.q, in.k, in.v, in.decay, in.beta, state);
  EXPECT_EQ(r.out.shape(), (Shape{1, 0, 2, 4}));
  EXPECT_EQ(r.state.to_vector<float>(), state.to_vector<float>());
}

TEST(GatedDeltaRule, BadInputIsAnErrorNamingIt) {
  const Inputs in = inputs(1, 3, 2, 4, 5, DType::f32, 31);
  expect_error([&] { gated_delta_rule(in.q, in.k.slice(3, 0, 3), in.v, in.decay, in.beta); },
               {"gated_delta_rule", "q and k of shape (B, T, H, K)"});
  expect_error([&] { gated_delta_rule(in.q, in.k, in.v, in.beta.slice(1, 0, 2), in.beta); },
               {"gated_delta_rule", "decay and beta of shape (B, T, H) = [1, 3, 2]"});
  expect_error(
      [&] {
        gated_delta_rule(in.q, in.k, in.v, in.decay, in.beta, Tensor::zeros({1, 2, 5, 4}));
      },
      {"gated_delta_rule", "state of shape (B, H, K, V) = [1, 2, 4, 5]"});
  expect_error([&] { gated_delta_rule(in.q.to(DType::bf16), in.k, in.v, in.decay, in.beta); },
               {"gated_delta_rule", "f32 or f64"});
  const Tensor trained = Tensor::zeros({1, 2, 4, 5}).requires_grad(true);
  expect_error([&] { gated_delta_rule(in.q, in.k, in.v, in.decay, in.beta, trained); },
               {"the initial state takes no gradient"});
}

}  // namespace
}  // namespace reprise::ops
