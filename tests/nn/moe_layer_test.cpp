// nn/moe: the MoE layer's gradients in f64 (routing fixed: the central
// differences are far smaller than any score gap), dispatch and combine
// bitwise identical at 1 and 2 threads, the capacity limit (dropped
// assignments counted, their contribution zero), the aux and z losses
// against values computed by hand, and clear errors on bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

#include "autograd/backward.h"
#include "autograd/scope.h"
#include "engine/threads.h"
#include "nn/moe.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/support/gradcheck.h"

namespace reprise::nn {
namespace {

using testing::gradcheck;
using testing::param;
using testing::uniform;

// E experts of (F, C) in `dtype`, leaves that require grad.
MoeWeights make_weights(const MoeConfig& c, int64_t C, int64_t F, DType dtype, uint64_t seed) {
  auto leaf = [&](const Shape& s, uint64_t k) {
    return uniform(s, -0.5, 0.5, seed + k, dtype).requires_grad(true);
  };
  MoeWeights w;
  w.gate = leaf({c.num_local_experts, C}, 1);
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    w.w1.push_back(leaf({F, C}, 10 + uint64_t(e)));
    w.w2.push_back(leaf({C, F}, 20 + uint64_t(e)));
    w.w3.push_back(leaf({F, C}, 30 + uint64_t(e)));
  }
  if (c.n_shared_experts > 0) {
    w.shared_gate = leaf({c.n_shared_experts * F, C}, 40);
    w.shared_up = leaf({c.n_shared_experts * F, C}, 41);
    w.shared_down = leaf({C, c.n_shared_experts * F}, 42);
  }
  return w;
}

// The inputs of a gradient check: x, then every weight.
std::vector<Tensor> flatten(const Tensor& x, const MoeWeights& w) {
  std::vector<Tensor> in{x, w.gate};
  for (size_t e = 0; e < w.w1.size(); ++e) {
    in.push_back(w.w1[e]);
    in.push_back(w.w2[e]);
    in.push_back(w.w3[e]);
  }
  if (w.shared_gate.defined()) {
    in.insert(in.end(), {w.shared_gate, w.shared_up, w.shared_down});
  }
  return in;
}

MoeWeights unflatten(const std::vector<Tensor>& in, const MoeConfig& c) {
  MoeWeights w;
  w.gate = in[1];
  size_t i = 2;
  for (int64_t e = 0; e < c.num_local_experts; ++e) {
    w.w1.push_back(in[i++]);
    w.w2.push_back(in[i++]);
    w.w3.push_back(in[i++]);
  }
  if (c.n_shared_experts > 0) {
    w.shared_gate = in[i++];
    w.shared_up = in[i++];
    w.shared_down = in[i++];
  }
  return w;
}

// Both router loss terms recorded (a zero coefficient records neither).
MoeConfig small(int64_t E = 4, int64_t k = 2) {
  MoeConfig c;
  c.num_local_experts = E;
  c.num_experts_per_tok = k;
  c.router_z_loss_coef = 1e-3;
  return c;
}

// The output, the router's probability mass and z-sum, flattened, so that
// one gradient check covers the layer and its loss terms.
Tensor layer_and_terms(const std::vector<Tensor>& in, const MoeConfig& c) {
  MoeResult r = moe_forward(in[0], unflatten(in, c), c, "moe");
  return ops::cat({ops::reshape(r.out, {-1}), r.terms.prob_sum, ops::unsqueeze(r.terms.z_sum, 0)},
                  0);
}

struct GradCase {
  const char* name;
  MoeConfig config;
};

class MoeGradcheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(MoeGradcheck, F64ThroughTheLayerWithRoutingFixed) {
  const MoeConfig c = GetParam().config;
  Tensor x = param({2, 5, 6}, 7);  // (B, T, C), N = 10 tokens
  MoeWeights w = make_weights(c, 6, 5, DType::f64, 100);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return layer_and_terms(in, c); },
                        flatten(x, w)));
}

MoeConfig with(MoeConfig c, auto edit) {
  edit(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, MoeGradcheck,
    ::testing::Values(GradCase{"mixtral", small()}, GradCase{"top1_of_3", small(3, 1)},
                      GradCase{"sigmoid_unnormalized", with(small(),
                                                            [](MoeConfig& c) {
                                                              c.scoring_func =
                                                                  RouterScoring::sigmoid;
                                                              c.norm_topk_prob = false;
                                                            })},
                      GradCase{"capacity_and_shared",
                               with(small(),
                                    [](MoeConfig& c) {
                                      c.capacity_factor =
                                          0.6;  // 3 of the 5 each expert would get on average
                                      c.n_shared_experts = 2;
                                    })}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MoeLayer, Bf16RouterRoundsTheGateMatmul) {
  // One token, two experts, top-1: the logits are 1 and 1.001 in f32, a
  // tie in bf16 (8 significant bits), where the lower expert wins.
  MoeConfig c = small(2, 1);
  Tensor x = Tensor::from_vector(std::vector<float>{1.0f, 1e-3f}, {1, 2});
  MoeWeights w = make_weights(c, 2, 3, DType::f32, 700);
  w.gate = Tensor::from_vector(std::vector<float>{1, 0, 1, 1}, {2, 2});
  const MoeLayerStats f32 = moe_forward(x, w, c, "moe").stats();
  EXPECT_EQ(f32.tokens_per_expert, (std::vector<int64_t>{0, 1}));
  c.router_dtype = RouterDType::bf16;
  const MoeLayerStats bf16 = moe_forward(x, w, c, "moe").stats();
  EXPECT_EQ(bf16.tokens_per_expert, (std::vector<int64_t>{1, 0}));
  // The f32 scores differ by about 2.5e-4 (over 4000 ulps of 0.5); the
  // bf16 router's tie is a near-tie at every margin.
  EXPECT_EQ(f32.within_ulps, (std::array<int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(bf16.within_ulps, (std::array<int64_t, 3>{1, 1, 1}));

  // Values bf16 holds exactly give the f32 router's bits.
  Tensor xe = Tensor::from_vector(std::vector<float>{1.0f, -0.5f, 2.0f, 0.25f}, {2, 2});
  const Tensor bf = moe_forward(xe, w, c, "moe").out;
  c.router_dtype = RouterDType::f32;
  EXPECT_EQ(bf.to_vector<float>(), moe_forward(xe, w, c, "moe").out.to_vector<float>());
}

// Bit patterns of the output and every gradient of a forward + backward.
std::vector<std::vector<uint32_t>> run_bits(const MoeConfig& c) {
  Tensor x = uniform({4, 64, 48}, -1, 1, 3, DType::f32).requires_grad(true);  // N = 256
  MoeWeights w = make_weights(c, 48, 80, DType::f32, 200);
  MoeResult r = moe_forward(x, w, c, "moe");
  autograd::backward(ops::sum(ops::mul(r.out, r.out)));
  std::vector<std::vector<uint32_t>> out;
  auto bits = [&](const Tensor& t) {
    std::vector<uint32_t> b;
    for (float f : t.to_vector<float>()) b.push_back(std::bit_cast<uint32_t>(f));
    out.push_back(std::move(b));
  };
  bits(r.out);
  for (const Tensor& t : flatten(x, w)) bits(t.grad());
  return out;
}

TEST(MoeLayer, DispatchAndCombineAreBitwiseIdenticalAtOneAndTwoThreads) {
  const int threads = threads::num_threads();
  MoeConfig c = small(8, 2);
  c.capacity_factor = 1.0;
  c.n_shared_experts = 1;
  threads::set_num_threads(1);
  const auto one = run_bits(c);
  threads::set_num_threads(2);
  const auto two = run_bits(c);
  threads::set_num_threads(threads);
  EXPECT_EQ(one, two);
}

TEST(MoeLayer, CapacityDropsTheLatestTokensAndCountsThem) {
  // Every token prefers expert 0 (k = 1): gate row 0 is large along x's
  // positive features, and x is positive.
  MoeConfig c = small(2, 1);
  c.capacity_factor = 1.0;  // ceil(1.0 * 6 * 1 / 2) = 3 per expert
  const int64_t N = 6, C = 4, F = 3;
  EXPECT_EQ(c.capacity(N), 3);
  Tensor x = uniform({N, C}, 0.5, 1.0, 5, DType::f64);
  MoeWeights w = make_weights(c, C, F, DType::f64, 300);
  w.gate = Tensor::from_vector(std::vector<double>{2, 2, 2, 2, -2, -2, -2, -2}, {2, C});
  MoeResult capped = moe_forward(x, w, c, "model.layers.0.block_sparse_moe");
  EXPECT_EQ(capped.stats().tokens, N);
  EXPECT_EQ(capped.stats().tokens_per_expert, (std::vector<int64_t>{6, 0}));
  EXPECT_EQ(capped.stats().dropped_per_expert, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(capped.stats().tokens_dropped, 3);
  EXPECT_EQ(capped.stats().layer, "model.layers.0.block_sparse_moe");

  c.capacity_factor = 0;
  MoeResult open = moe_forward(x, w, c, "moe");
  EXPECT_EQ(open.stats().tokens_dropped, 0);
  const std::vector<double> a = capped.out.to_vector<double>(), b = open.out.to_vector<double>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < C; ++j) {
      const size_t i = size_t(n * C + j);
      if (n < 3) {
        // The earliest tokens are kept, with the same value up to rounding
        // (expert 0's block has 3 rows instead of 6, and the GEMM's
        // blocking depends on the row count).
        EXPECT_NEAR(a[i], b[i], 1e-14) << "kept token " << n;
      } else {
        EXPECT_EQ(a[i], 0.0) << "dropped token " << n;  // nothing from the experts
      }
    }
  }
  EXPECT_NE(b[size_t(5 * C)], 0.0);

  // With shared experts a dropped token gets exactly their output.
  c.capacity_factor = 1.0;
  c.n_shared_experts = 1;
  MoeWeights ws = make_weights(c, C, F, DType::f64, 300);
  ws.gate = w.gate;
  MoeResult shared = moe_forward(x, ws, c, "moe");
  Tensor h = ops::linear(x, ws.shared_gate), u = ops::linear(x, ws.shared_up);
  Tensor expected = ops::linear(ops::mul(ops::silu(h), u), ws.shared_down);  // (N, C)
  EXPECT_EQ(ops::slice(shared.out, 0, 3, 6).to_vector<double>(),
            ops::slice(expected, 0, 3, 6).to_vector<double>());  // tokens 3..5 were dropped
}

TEST(MoeLayer, AuxAndZLossesMatchValuesComputedByHand) {
  // N = 3 tokens, E = 3 experts, k = 1; logits = x @ gate^T with gate = I,
  // so the logits are the rows of x.
  MoeConfig c = small(3, 1);
  const std::vector<double> logits{2.0, 0.5, -1.0, 0.1, 0.3, 0.2, -0.4, -0.4, 1.5};
  Tensor x = Tensor::from_vector(logits, {3, 3});
  MoeWeights w = make_weights(c, 3, 2, DType::f64, 400);
  w.gate = Tensor::from_vector(std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3});
  MoeResult r = moe_forward(x, w, c, "moe");
  // By hand: p = softmax of each row; token 0 picks expert 0, token 1
  // expert 1, token 2 expert 2, so routed = (1, 1, 1) and
  // aux = E * sum_e (1/3) * mean_n p[n, e] = sum_n,e p[n, e] / 3 = 1.
  // z = mean_n logsumexp(row n)^2.
  double z = 0;
  for (int n = 0; n < 3; ++n) {
    double s = 0;
    for (int e = 0; e < 3; ++e) s += std::exp(logits[size_t(n * 3 + e)]);
    z += std::log(s) * std::log(s) / 3;
  }
  EXPECT_EQ(r.stats().tokens_per_expert, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_NEAR(r.stats().aux_loss, 1.0, 1e-15);
  EXPECT_NEAR(r.stats().z_loss, z, 1e-14);

  // Unbalanced: move token 1 to expert 0; aux = 3 * (2/3 * P0 + 0 * P1 + 1/3 * P2)
  // with P_e = mean_n p[n, e].
  std::vector<double> l2 = logits;
  l2[3] = 1.0;  // token 1: (1.0, 0.3, 0.2)
  MoeResult u = moe_forward(Tensor::from_vector(l2, {3, 3}), w, c, "moe");
  double P[3] = {0, 0, 0};
  for (int n = 0; n < 3; ++n) {
    double s = 0;
    for (int e = 0; e < 3; ++e) s += std::exp(l2[size_t(n * 3 + e)]);
    for (int e = 0; e < 3; ++e) P[e] += std::exp(l2[size_t(n * 3 + e)]) / s / 3;
  }
  EXPECT_EQ(u.stats().tokens_per_expert, (std::vector<int64_t>{2, 0, 1}));
  EXPECT_NEAR(u.stats().aux_loss, 3 * (2.0 / 3 * P[0] + 1.0 / 3 * P[2]), 1e-14);
}

TEST(MoeLayer, ATermWithAZeroCoefficientRecordsNothing) {
  MoeConfig c = small();
  Tensor x = uniform({5, 6}, -1, 1, 8, DType::f32).requires_grad(true);
  MoeWeights w = make_weights(c, 6, 5, DType::f32, 450);
  MoeResult both = moe_forward(x, w, c, "moe");
  EXPECT_TRUE(both.terms.prob_sum.requires_grad());
  EXPECT_TRUE(both.terms.z_sum.requires_grad());
  c.router_aux_loss_coef = 0;
  c.router_z_loss_coef = 0;
  MoeResult none = moe_forward(x, w, c, "moe");
  EXPECT_FALSE(none.terms.prob_sum.requires_grad());
  EXPECT_FALSE(none.terms.z_sum.requires_grad());
  EXPECT_EQ(none.stats().z_loss, both.stats().z_loss);  // the values are the same
  EXPECT_EQ(none.stats().aux_loss, both.stats().aux_loss);
}

TEST(MoeLayer, TheRouterIsRecordedUnderTheGateScope) {
  MoeConfig c = small();
  Tensor x = uniform({5, 6}, -1, 1, 9, DType::f32);
  MoeWeights w = make_weights(c, 6, 5, DType::f32, 500);
  MoeResult r;
  {
    autograd::Scope s("model.layers.0.block_sparse_moe");
    r = moe_forward(x, w, c, "model.layers.0.block_sparse_moe");
  }
  // out = index_add(...): its producer is under experts; walk to the route op.
  std::vector<std::string> ops_at_gate;
  std::vector<const autograd::Node*> stack{r.out.grad_fn().get()};
  std::set<const autograd::Node*> seen;
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    if (n->scope() == "model.layers.0.block_sparse_moe.gate" &&
        std::string(n->name()) != "accumulate_grad") {
      ops_at_gate.push_back(n->name());
    }
    for (const autograd::Edge& e : n->next_edges) stack.push_back(e.node.get());
  }
  std::sort(ops_at_gate.begin(), ops_at_gate.end());
  EXPECT_EQ(ops_at_gate, (std::vector<std::string>{"linear", "moe_route", "softmax"}));
}

TEST(MoeLayer, BadInputRaisesErrorsNamingTheLayerAndValues) {
  MoeConfig c = small();
  MoeWeights w = make_weights(c, 6, 5, DType::f32, 600);
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto has = [](const std::string& m, const char* part) {
    return m.find(part) != std::string::npos;
  };
  const std::string layer = "model.layers.3.block_sparse_moe";
  std::string m = message([&] { moe_forward(Tensor::zeros({2, 3, 7}), w, c, layer); });
  EXPECT_TRUE(has(m, "model.layers.3.block_sparse_moe") && has(m, "C = 7") && has(m, "C = 6")) << m;
  m = message([&] { moe_forward(Tensor::zeros({6}), w, c, layer); });
  EXPECT_TRUE(has(m, layer.c_str()) && has(m, "(B, T, C) or (N, C)")) << m;
  MoeWeights short_w = w;
  short_w.w2.pop_back();
  m = message([&] { moe_forward(Tensor::zeros({3, 6}), short_w, c, layer); });
  EXPECT_TRUE(has(m, layer.c_str()) && has(m, "expected 4 experts")) << m;
  MoeWeights bad_w3 = w;
  bad_w3.w3[2] = Tensor::zeros({5, 5});
  m = message([&] { moe_forward(Tensor::zeros({3, 6}), bad_w3, c, layer); });
  EXPECT_TRUE(has(m, "experts.2.w3") && has(m, "[5, 6]") && has(m, "[5, 5]")) << m;

  MoeConfig k5 = small(4, 5);
  m = message([&] { k5.validate(); });
  EXPECT_TRUE(has(m, "num_experts_per_tok") && has(m, "got 5")) << m;
  MoeConfig jitter = small();
  jitter.router_jitter_noise = 0.01;
  m = message([&] { jitter.validate(); });
  EXPECT_TRUE(has(m, "router_jitter_noise") && has(m, "0.01")) << m;
  MoeConfig capacity = small();
  capacity.capacity_factor = -1;
  m = message([&] { capacity.validate(); });
  EXPECT_TRUE(has(m, "capacity_factor") && has(m, "-1")) << m;
  m = message([&] { SparseMoeBlock("block_sparse_moe", 6, 5, k5); });
  EXPECT_TRUE(has(m, "num_experts_per_tok")) << m;
}

}  // namespace
}  // namespace reprise::nn
