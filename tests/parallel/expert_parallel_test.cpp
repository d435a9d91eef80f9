// An expert-parallel MoE layer against the same layer in one process: each
// rank routes its own tokens, so every token goes to the same experts, and
// the outputs, the input gradients and the router's gradient are the same
// bits; an expert's weight gradient is the rank-ordered sum of what each
// rank's tokens give it in one process.
#include "parallel/expert_parallel.h"

#include <gtest/gtest.h>

#include "autograd/backward.h"
#include "ops/binary.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "tests/parallel/test_world.h"
#include "tests/support/expect_error.h"

namespace reprise::parallel {
namespace {

// A leaf of `shape` with normal(0, scale^2) values from `stream` of a
// generator seeded with `seed`: the same on every rank for the same seed.
Tensor leaf(const Shape& shape, uint64_t seed, double scale) {
  rng::Generator gen(seed);
  Tensor t = Tensor::empty(shape);
  ops::normal_(t, 0.0, scale, gen, "test");
  return t.requires_grad(true);
}

nn::MoeWeights all_experts(const nn::MoeConfig& c, int64_t C, int64_t F) {
  nn::MoeWeights w;
  w.gate = leaf({c.num_local_experts, C}, 1, 0.5);
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    w.w1.push_back(leaf({F, C}, 10 + uint64_t(e), 0.3));
    w.w2.push_back(leaf({C, F}, 20 + uint64_t(e), 0.3));
    w.w3.push_back(leaf({F, C}, 30 + uint64_t(e), 0.3));
  }
  return w;
}

class ExpertParallelLayer : public ::testing::TestWithParam<double> {};

TEST_P(ExpertParallelLayer, MatchesOneProcessBitForBit) {
  const std::shared_ptr<Communicator>& comm = testing::test_world().communicator();
  const int rank = comm->rank();
  nn::MoeConfig c;
  c.num_local_experts = 4;
  c.num_experts_per_tok = 2;
  c.capacity_factor = GetParam();  // 0: dropless
  const int64_t C = 8, F = 6, N = 24;
  const nn::MoeWeights full = all_experts(c, C, F);
  const Tensor x = leaf({N, C}, 100 + uint64_t(rank), 1.0);           // this rank's tokens
  const Tensor g = leaf({N, C}, 200 + uint64_t(rank), 1.0).detach();  // d(loss)/d(out)

  // One process: this rank's tokens through every expert.
  const nn::MoeResult ref = nn::moe_forward(x, full, c, "moe");
  autograd::Tensors inputs{x, full.gate};
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    inputs.insert(inputs.end(), {full.w1[size_t(e)], full.w2[size_t(e)], full.w3[size_t(e)]});
  }
  const autograd::Tensors ref_grads =
      autograd::grad({ops::sum(ops::mul(ref.out, g))}, inputs, {}, {}, true);

  // Expert parallel: this rank's experts only.
  const ExpertParallel dispatch(comm);
  const nn::ExpertRange held = dispatch.local_experts(c.num_local_experts);
  nn::MoeWeights mine{.gate = full.gate, .first_expert = held.first};
  autograd::Tensors ep_inputs{x, full.gate};
  for (int64_t e = held.first; e < held.first + held.count; ++e) {
    mine.w1.push_back(full.w1[size_t(e)]);
    mine.w2.push_back(full.w2[size_t(e)]);
    mine.w3.push_back(full.w3[size_t(e)]);
    ep_inputs.insert(ep_inputs.end(), {full.w1[size_t(e)], full.w2[size_t(e)], full.w3[size_t(e)]});
  }
  const nn::MoeResult ep = nn::moe_forward(x, mine, c, "moe", &dispatch);
  EXPECT_EQ(ep.stats().tokens_per_expert, ref.stats().tokens_per_expert);
  EXPECT_EQ(ep.stats().dropped_per_expert, ref.stats().dropped_per_expert);
  EXPECT_EQ(ep.out.to_vector<float>(), ref.out.to_vector<float>());
  const autograd::Tensors ep_grads =
      autograd::grad({ops::sum(ops::mul(ep.out, g))}, ep_inputs, {}, {}, true);
  EXPECT_EQ(ep_grads[0].to_vector<float>(), ref_grads[0].to_vector<float>()) << "d/dx";
  EXPECT_EQ(ep_grads[1].to_vector<float>(), ref_grads[1].to_vector<float>()) << "d/dgate";
  // An expert's gradient: every rank's one-process gradient, in rank order.
  for (int64_t i = 0; i < 3 * c.num_local_experts; ++i) {
    Tensor summed = ref_grads[size_t(2 + i)].contiguous().clone();
    comm->all_reduce(summed);
    const int64_t e = i / 3;
    if (e < held.first || e >= held.first + held.count) continue;
    const size_t local = size_t(2 + (e - held.first) * 3 + i % 3);
    EXPECT_EQ(ep_grads[local].to_vector<float>(), summed.to_vector<float>())
        << "expert " << e << " weight " << i % 3;
  }
}

INSTANTIATE_TEST_SUITE_P(Capacity, ExpertParallelLayer, ::testing::Values(0.0, 1.0));

TEST(ExpertParallel, ExpertsMustSplitEvenly) {
  const std::shared_ptr<Communicator>& comm = testing::test_world().communicator();
  const ExpertParallel dispatch(comm);
  const int R = comm->size();
  EXPECT_EQ(dispatch.local_experts(2 * R).count, 2);
  EXPECT_EQ(dispatch.local_experts(2 * R).first, 2 * comm->rank());
  if (R > 1) {
    testing::expect_error([&] { dispatch.local_experts(2 * R + 1); },
                          {"experts per layer do not split evenly"});
  }
}

}  // namespace
}  // namespace reprise::parallel
