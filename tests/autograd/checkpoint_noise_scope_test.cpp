// CheckpointOptions::noise_scopes: recompute noise perturbs only the
// replayed outputs of nodes whose scope matches the glob.
#include <gtest/gtest.h>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/scope.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "tests/support/gradcheck.h"

namespace reprise::autograd {
namespace {

using testing::uniform;

// Two stages under their own scopes, "<region>.first" then "<region>.second".
Tensor two_stages(const Tensor& x, const Tensor& w) {
  Tensor h;
  {
    Scope s("first");
    h = ops::tanh(ops::mul(x, w));
  }
  Scope s("second");
  return ops::silu(ops::mul(h, w));
}

// d sum(region(x))^2 / dw under the bitwise verifier (reporting) with
// `ulps` of noise on `scopes`, and the mismatches reported.
std::pair<std::vector<float>, std::vector<Mismatch>> run_noisy(int ulps, std::string scopes) {
  const CheckpointOptions o{.verify = Verify::bitwise,
                            .on_mismatch = OnMismatch::report,
                            .recompute_noise_ulps = ulps,
                            .noise_scopes = std::move(scopes)};
  Tensor x = uniform({3, 17}, -1, 1, 1, DType::f32);
  Tensor w = uniform({17}, -1, 1, 2, DType::f32).requires_grad(true);
  Tensor y = checkpoint(
      "r", policies::full(), [&] { return two_stages(x, w); }, o);
  backward(ops::sum(ops::mul(y, y)));
  return {w.grad().to_vector<float>(), take_mismatches()};
}

TEST(CheckpointNoiseScopes, OnlyMatchingNodesArePerturbed) {
  take_mismatches();
  const auto [clean, none] = run_noisy(0, "*");
  EXPECT_TRUE(none.empty());

  // 16 ulps: the noise's salt is each node's global sequence number, so
  // its draw depends on what ran before in the process, and one ulp on
  // these 51 values has been seen to leave the gradient's bits unchanged.
  const auto [noisy, found] = run_noisy(16, "*.second");
  ASSERT_FALSE(found.empty());
  for (const Mismatch& m : found) EXPECT_EQ(m.scope, "r.second") << m.describe();
  EXPECT_NE(noisy, clean);

  // The default "*" perturbs the first stage too.
  const auto [all, everywhere] = run_noisy(1, "*");
  ASSERT_FALSE(everywhere.empty());
  EXPECT_EQ(everywhere[0].scope, "r.first");

  // A glob that matches nothing: no noise, gradients bitwise equal.
  const auto [same, quiet] = run_noisy(1, "*.router");
  EXPECT_TRUE(quiet.empty());
  EXPECT_EQ(same, clean);
}

}  // namespace
}  // namespace reprise::autograd
