// Matrix products and attention of the CUDA backend, simulated, against
// the CPU backend. The simulator runs a product as one FMA chain per
// element over k from 0, the CPU's definition, so these check the layout
// logic (transposed, strided, broadcast and folded operands) bit for bit;
// on a GPU cuBLASLt computes them. Attention is our own kernel on both and
// gives the CPU's bits, dropout included (lse up to the log's last place,
// the same library here).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/kernels/attention.h"
#include "cuda/kernels/matmul.h"
#include "engine/backend.h"
#include "tests/cuda/sim_support.h"

namespace reprise::testing {
namespace {

using cuda::SimExec;

TEST(CudaSimMatmul, EveryOperandLayoutMatchesTheCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor a = random_tensor({3, 5, 7}, 1, dtype);
    const Tensor b = random_tensor({3, 7, 4}, 2, dtype);
    const Tensor at = random_tensor({3, 7, 5}, 3, dtype).transpose(1, 2);  // column-major
    const Tensor bt = random_tensor({4, 7}, 4, dtype).transpose(0, 1);     // shared, column-major
    const Tensor bb = random_tensor({2, 1, 7, 4}, 5, dtype);               // broadcast batch
    const Tensor strided =
        random_tensor({3, 5, 14}, 6, dtype).slice(2, 0, 14, 2);  // no unit stride
    const std::vector<std::pair<Tensor, Tensor>> cases = {
        {a, b}, {at, b}, {a, bt}, {at, bt}, {a, bb}, {strided, b}, {a.select(0, 1), bt}};
    for (size_t i = 0; i < cases.size(); ++i) {
      const Tensor want = cpu_backend().matmul(cases[i].first, cases[i].second);
      const auto got = simulate([&](const SimExec& ex) {
        return std::vector<Tensor>{cuda::matmul(ex, cases[i].first, cases[i].second)};
      });
      expect_same(got, {want}, std::string(dtype_name(dtype)) + " case " + std::to_string(i));
    }
  }
}

struct AttnCase {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  bool causal;
  double p;
  int64_t offset = 0;  // causal offset
};

class CudaSimAttention : public ::testing::TestWithParam<std::tuple<DType, AttnCase>> {};

TEST_P(CudaSimAttention, ForwardAndBackwardMatchTheCpu) {
  const auto [dtype, c] = GetParam();
  // q as the transpose of (B, T, Hq, D), as a model makes it.
  const Tensor q = random_tensor({c.B, c.T, c.Hq, c.D}, 1, dtype).transpose(1, 2);
  const Tensor k = random_tensor({c.B, c.Hkv, c.S, c.D}, 2, dtype);
  const Tensor v = random_tensor({c.B, c.Hkv, c.S, c.Dv}, 3, dtype);
  const Tensor dout = random_tensor({c.B, c.Hq, c.T, c.Dv}, 4, dtype);
  AttentionParams params{
      .scale = 1 / std::sqrt(double(c.D)), .causal = c.causal, .causal_offset = c.offset};
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
                                         AttnCase{1, 2, 2, 1, 67, 8, 8, true, 0, 66})));

}  // namespace
}  // namespace reprise::testing
