// Attention of the CUDA backend (cuda/kernels/attention.h), simulated,
// against the CPU backend. It is our own kernel on both and gives the CPU's
// bits, dropout and sliding windows included (lse up to the log's last
// place, the same library here).
#include "cuda/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend.h"
#include "tests/cuda/sim_support.h"

namespace reprise::testing {
namespace {

using cuda::SimExec;

struct AttnCase {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  bool causal;
  double p;
  int64_t offset = 0;  // causal offset
  int64_t window = 0;  // sliding window (causal only), 0: none
};

class CudaSimAttention : public ::testing::TestWithParam<std::tuple<DType, AttnCase>> {};

TEST_P(CudaSimAttention, ForwardAndBackwardMatchTheCpu) {
  const auto [dtype, c] = GetParam();
  // q as the transpose of (B, T, Hq, D), as a model makes it.
  const Tensor q = random_tensor({c.B, c.T, c.Hq, c.D}, 1, dtype).transpose(1, 2);
  const Tensor k = random_tensor({c.B, c.Hkv, c.S, c.D}, 2, dtype);
  const Tensor v = random_tensor({c.B, c.Hkv, c.S, c.Dv}, 3, dtype);
  const Tensor dout = random_tensor({c.B, c.Hq, c.T, c.Dv}, 4, dtype);
  AttentionParams params{.scale = 1 / std::sqrt(double(c.D)),
                         .causal = c.causal,
                         .causal_offset = c.offset,
                         .window = c.window};
  if (c.p > 0) {
    params.dropout = AttentionDropout{
        .words = {.seed = 99, .subsequence = 3, .offset = 6, .count = uint64_t(1) << 40}, .p = c.p};
  }
  const Tensors fwd = cpu_backend().sdpa(q, k, v, params);
  std::vector<Tensor> want{fwd[0], fwd[1]};
  for (const Tensor& g :
       cpu_backend().sdpa_backward(q, k, v, fwd[0], fwd[1], dout, params, true, true))
    want.push_back(g);
  const auto got = simulate([&](const SimExec& ex) {
    const Tensors out = cuda::sdpa(ex, q, k, v, params);
    std::vector<Tensor> r{out[0], out[1]};
    for (const Tensor& g :
         cuda::sdpa_backward(ex, q, k, v, out[0], out[1], dout, params, true, true))
      r.push_back(g);
    return r;
  });
  expect_same(got, want, "sdpa");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaSimAttention,
    ::testing::Combine(::testing::Values(DType::f32, DType::f64),
                       ::testing::Values(AttnCase{1, 2, 2, 5, 5, 4, 4, false, 0},
                                         AttnCase{2, 4, 2, 70, 70, 8, 6, true, 0},
                                         AttnCase{1, 2, 1, 67, 131, 5, 3, false, 0.25},
                                         AttnCase{1, 3, 3, 130, 130, 16, 16, true, 0.5},
                                         AttnCase{1, 1, 1, 3, 70, 4, 4, true, 0},
                                         AttnCase{1, 2, 1, 70, 140, 5, 3, true, 0.25, 70},
                                         AttnCase{1, 2, 2, 1, 67, 8, 8, true, 0, 66},
                                         // Sliding windows: one key; less than a tile, with
                                         // dropout; past a tile, so whole tiles before each
                                         // query block's window are skipped; a KV cache's
                                         // offset S - T; one decode step; more queries than
                                         // keys.
                                         AttnCase{1, 2, 1, 70, 70, 8, 6, true, 0, 0, 1},
                                         AttnCase{1, 2, 2, 130, 130, 16, 16, true, 0.5, 0, 20},
                                         AttnCase{1, 2, 1, 200, 200, 4, 4, true, 0, 0, 70},
                                         AttnCase{1, 2, 1, 70, 140, 5, 3, true, 0.25, 70, 64},
                                         AttnCase{1, 2, 2, 1, 200, 8, 8, true, 0, 199, 65},
                                         AttnCase{1, 2, 2, 90, 75, 4, 6, true, 0, 0, 30})));

}  // namespace
}  // namespace reprise::testing
