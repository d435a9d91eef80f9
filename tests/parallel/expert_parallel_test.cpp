// An expert-parallel MoE layer against the same layer in one process: each
// rank routes its own tokens, so every token goes to the same experts, and
// the outputs, the input gradients and the router's gradient are the same
// bits; an expert's weight gradient is the rank-ordered sum of what each
// rank's tokens give it in one process. With GPT-OSS's pieces (biases, the
// clamped SwiGLU) too.
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

// The layer's pieces: the capacity factor (0: dropless), and GPT-OSS's
// biased router and experts with the clamped SwiGLU.
struct Pieces {
  double capacity_factor = 0;
  bool gpt_oss = false;
};

nn::MoeConfig config_of(const Pieces& p) {
  nn::MoeConfig c;
  c.num_local_experts = 4;
  c.num_experts_per_tok = 2;
  c.capacity_factor = p.capacity_factor;
  c.router_bias = c.expert_bias = c.clamped_swiglu = p.gpt_oss;
  c.swiglu_limit = 0.5;  // binds for some rows at these scales
  return c;
}

nn::MoeWeights all_experts(const nn::MoeConfig& c, int64_t C, int64_t F) {
  nn::MoeWeights w;
  w.gate = leaf({c.num_local_experts, C}, 1, 0.5);
  if (c.router_bias) w.gate_bias = leaf({c.num_local_experts}, 2, 0.5);
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    w.w1.push_back(leaf({F, C}, 10 + uint64_t(e), 0.3));
    w.w2.push_back(leaf({C, F}, 20 + uint64_t(e), 0.3));
    w.w3.push_back(leaf({F, C}, 30 + uint64_t(e), 0.3));
    if (!c.expert_bias) continue;
    w.b1.push_back(leaf({F}, 40 + uint64_t(e), 0.3));
    w.b2.push_back(leaf({C}, 50 + uint64_t(e), 0.3));
    w.b3.push_back(leaf({F}, 60 + uint64_t(e), 0.3));
  }
  return w;
}

// Expert e's tensors in `w` (held at index i): its weights, then its biases.
std::vector<Tensor> expert_tensors(const nn::MoeWeights& w, size_t i) {
  std::vector<Tensor> out{w.w1[i], w.w2[i], w.w3[i]};
  if (!w.b1.empty()) out.insert(out.end(), {w.b1[i], w.b2[i], w.b3[i]});
  return out;
}

class ExpertParallelLayer : public ::testing::TestWithParam<Pieces> {};

TEST_P(ExpertParallelLayer, MatchesOneProcessBitForBit) {
  const std::shared_ptr<Communicator>& comm = testing::test_world().communicator();
  const int rank = comm->rank();
  const nn::MoeConfig c = config_of(GetParam());
  const int64_t C = 8, F = 6, N = 24;
  const nn::MoeWeights full = all_experts(c, C, F);
  const Tensor x = leaf({N, C}, 100 + uint64_t(rank), 1.0);           // this rank's tokens
  const Tensor g = leaf({N, C}, 200 + uint64_t(rank), 1.0).detach();  // d(loss)/d(out)
  autograd::Tensors shared{x, full.gate};                             // every rank's own
  if (full.gate_bias.defined()) shared.push_back(full.gate_bias);
  const size_t per_expert = expert_tensors(full, 0).size();

  // One process: this rank's tokens through every expert.
  const nn::MoeResult ref = nn::moe_forward(x, full, c, "moe");
  autograd::Tensors inputs = shared;
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    for (const Tensor& t : expert_tensors(full, size_t(e))) inputs.push_back(t);
  }
  const autograd::Tensors ref_grads =
      autograd::grad({ops::sum(ops::mul(ref.out, g))}, inputs, {}, {}, true);

  // Expert parallel: this rank's experts only.
  const ExpertParallel dispatch(comm);
  const nn::ExpertRange held = dispatch.local_experts(c.num_local_experts);
  nn::MoeWeights mine{.gate = full.gate, .gate_bias = full.gate_bias, .first_expert = held.first};
  autograd::Tensors ep_inputs = shared;
  for (int64_t e = held.first; e < held.first + held.count; ++e) {
    const size_t i = size_t(e);
    mine.w1.push_back(full.w1[i]);
    mine.w2.push_back(full.w2[i]);
    mine.w3.push_back(full.w3[i]);
    if (c.expert_bias) {
      mine.b1.push_back(full.b1[i]);
      mine.b2.push_back(full.b2[i]);
      mine.b3.push_back(full.b3[i]);
    }
    for (const Tensor& t : expert_tensors(full, i)) ep_inputs.push_back(t);
  }
  const nn::MoeResult ep = nn::moe_forward(x, mine, c, "moe", &dispatch);
  EXPECT_EQ(ep.stats().tokens_per_expert, ref.stats().tokens_per_expert);
  EXPECT_EQ(ep.stats().dropped_per_expert, ref.stats().dropped_per_expert);
  EXPECT_EQ(ep.out.to_vector<float>(), ref.out.to_vector<float>());
  const autograd::Tensors ep_grads =
      autograd::grad({ops::sum(ops::mul(ep.out, g))}, ep_inputs, {}, {}, true);
  for (size_t i = 0; i < shared.size(); ++i) {
    EXPECT_EQ(ep_grads[i].to_vector<float>(), ref_grads[i].to_vector<float>())
        << "the gradient of x, the router's weight or its bias (" << i << ")";
  }
  // An expert's gradient: every rank's one-process gradient, in rank order.
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    for (size_t j = 0; j < per_expert; ++j) {
      Tensor summed = ref_grads[shared.size() + size_t(e) * per_expert + j].contiguous().clone();
      comm->all_reduce(summed);
      if (e < held.first || e >= held.first + held.count) continue;
      const size_t local = shared.size() + size_t(e - held.first) * per_expert + j;
      EXPECT_EQ(ep_grads[local].to_vector<float>(), summed.to_vector<float>())
          << "expert " << e << " tensor " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pieces, ExpertParallelLayer,
                         ::testing::Values(Pieces{0.0, false}, Pieces{1.0, false},
                                           Pieces{0.0, true}, Pieces{1.0, true}),
                         [](const ::testing::TestParamInfo<Pieces>& info) {
                           return std::string(info.param.capacity_factor > 0 ? "capacity"
                                                                             : "dropless") +
                                  (info.param.gpt_oss ? "_gpt_oss" : "");
                         });

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
