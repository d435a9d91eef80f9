// grouped_linear and moe_route: the dispatch order moe_route promises, and
// their errors. Their cases are in tests/cases/moe.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/grad_mode.h"
#include "engine/route_choice.h"
#include "ops/grouped_linear.h"
#include "ops/matmul.h"
#include "ops/moe_route.h"
#include "ops/softmax.h"
#include "tests/support/gradcheck.h"

namespace reprise::ops {
namespace {

using testing::i64;
using testing::uniform;

// Blocks of 3, 0 (an empty expert) and 4 rows.
TEST(GroupedLinear, EachBlockIsItsOwnProduct) {
  NoGradGuard no_grad;
  const Tensor x = uniform({7, 5}, -1, 1, 71), w0 = uniform({6, 5}, -1, 1, 72),
               w2 = uniform({6, 5}, -1, 1, 74);
  Tensor y = grouped_linear(x, i64({3, 0, 4}), {w0, uniform({6, 5}, -1, 1, 73), w2});  // (7, 6)
  EXPECT_EQ(y.shape(), (Shape{7, 6}));
  Tensor first = linear(x.slice(0, 0, 3), w0);
  Tensor last = linear(x.slice(0, 3, 7), w2);
  EXPECT_LT(testing::max_abs_diff(y.slice(0, 0, 3), first), 1e-15);
  EXPECT_LT(testing::max_abs_diff(y.slice(0, 3, 7), last), 1e-15);
}

TEST(MoeRoute, SortsByExpertThenTokenAndDropsOverCapacity) {
  // Scores of 4 tokens for 3 experts, top-1 / top-2.
  Tensor s = Tensor::from_vector(
      std::vector<double>{0.1, 0.7, 0.2, 0.6, 0.3, 0.1, 0.2, 0.2, 0.6, 0.5, 0.4, 0.1}, {4, 3});
  MoeRoute r = moe_route(s, 2, true);
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 1, 2, 0, 0, 1}));
  // Expert 0: tokens 1, 2, 3; expert 1: tokens 0, 1, 3; expert 2: tokens 0, 2.
  EXPECT_EQ(r.token.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 1, 3, 0, 2}));
  EXPECT_EQ(r.counts.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(r.routed.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 2}));
  const std::vector<double> w = r.weights.to_vector<double>();
  EXPECT_DOUBLE_EQ(w[0], 0.6 / 0.9);  // token 1's gate for expert 0
  EXPECT_DOUBLE_EQ(w[6], 0.2 / 0.9);  // token 0's gate for expert 2
  // Ties (token 2: 0.2 and 0.2) go to the lower expert: 2 (0.6), then 0.
  // Capacity 2: expert 0 keeps tokens 1 and 2, expert 1 tokens 0 and 1.
  MoeRoute c = moe_route(s, 2, true, 2);
  EXPECT_EQ(c.token.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 1, 0, 2}));
  EXPECT_EQ(c.counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(c.routed.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 2}));
}

TEST(MoeRoute, MarginCountsTheUlpsToTheBestUnchosenExpert) {
  // f32 scores of 4 tokens for 4 experts, top-2:
  //   token 0: the 2nd (0.5) and 3rd (0.5) tie: margin 0;
  //   token 1: the 3rd is the 2nd's lower neighbour: margin 1;
  //   token 2: 0.5 against 0.25: 2^23 ulps (one binade);
  //   token 3: 0.75 against -0.25: through zero, counted on both sides.
  const float half = 0.5f, below = std::nextafter(half, 0.0f);
  Tensor s = Tensor::from_vector(std::vector<float>{0.9f, half, half, 0.1f,       //
                                                    below, 0.9f, half, 0.1f,      //
                                                    0.9f, half, 0.25f, 0.1f,      //
                                                    -0.5f, 0.75f, 1.0f, -0.25f},  //
                                 {4, 4});
  const int64_t one_binade = int64_t(1) << 23;
  const int64_t through_zero = route::ordered(0.75f) - route::ordered(-0.25f);
  EXPECT_EQ(through_zero, route::ordered(0.75f) + route::ordered(0.25f));
  EXPECT_EQ(moe_route(s, 2, true).margin.to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, one_binade, through_zero}));
  // Choosing every expert leaves no runner-up.
  EXPECT_EQ(moe_route(s, 4, true).margin.to_vector<int64_t>(),
            std::vector<int64_t>(4, route::kNoRunnerUp));
  // With a bias the margin is between biased values; with groups, among
  // the chosen groups only. Token 2 biased: 0.9 + 0, 0.5 + 0.5 = 1, 0.25 +
  // 0.75 = 1, 0.1 + 0: its top-2 are experts 1 and 2 (tie, lower first),
  // and the runner-up expert 0 (0.9) lies 0.1 below.
  const Tensor bias = Tensor::from_vector(std::vector<float>{0, 0.5f, 0.75f, 0}, {4});
  const MoeRoute biased = moe_route(s.slice(0, 2, 3), 2, {.bias = bias});
  EXPECT_EQ(biased.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(biased.margin.to_vector<int64_t>(),
            (std::vector<int64_t>{route::ulps_apart(half + 0.5f, 0.9f)}));
  // Two groups of 2, the best 1: token 0 keeps group 0 (0.9 + 0.5 > 0.5 +
  // 0.1) and chooses both its experts, so no runner-up is left.
  const MoeRoute grouped = moe_route(s.slice(0, 0, 1), 2, {.n_group = 2, .topk_group = 1});
  EXPECT_EQ(grouped.margin.to_vector<int64_t>(), (std::vector<int64_t>{route::kNoRunnerUp}));
}

TEST(MoeOps, BadInputsNameTheOpAndShapes) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor x = Tensor::zeros({5, 4}), w = Tensor::zeros({3, 4});
  std::string m = message([&] { grouped_linear(x, i64({2, 2}), {w, w}); });
  EXPECT_NE(m.find("counts sum to 4 but x f32[5, 4]"), std::string::npos) << m;
  m = message([&] { grouped_linear(x, i64({5}), {w, w}); });
  EXPECT_NE(m.find("E = 2 weights"), std::string::npos) << m;
  m = message([&] { grouped_linear(x, i64({5, 0}), {w, Tensor::zeros({3, 5})}); });
  EXPECT_NE(m.find("weights[1] f32[3, 5]"), std::string::npos) << m;
  m = message([&] { moe_route(x, 5, true); });
  EXPECT_NE(m.find("moe_route: k = 5 must be in [1, E = 4]"), std::string::npos) << m;
  m = message([&] { moe_route(Tensor::full({2, 3}, std::nan("")), 1, true); });
  EXPECT_NE(m.find("NaN"), std::string::npos) << m;
}

}  // namespace
}  // namespace reprise::ops
