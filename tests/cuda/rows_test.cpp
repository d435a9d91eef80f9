// Row kernels of the CUDA backend (reductions, softmax, cross_entropy,
// norms), simulated, against the CPU backend: the same bits, at row
// lengths below, at and past the 16 lanes, and ragged row counts.
#include <gtest/gtest.h>

#include "cuda/kernels/loss.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/reduce.h"
#include "cuda/kernels/softmax.h"
#include "engine/backend.h"
#include "tests/cuda/sim_support.h"

namespace reprise::testing {
namespace {

using cuda::SimExec;

class CudaSimRows : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  int64_t M() const { return std::get<1>(GetParam()); }
  int64_t R() const { return std::get<2>(GetParam()); }
  Tensor x(uint64_t seed, double lo = -3, double hi = 3) const {
    return random_tensor({M(), R()}, seed, dtype(), lo, hi);
  }
};

TEST_P(CudaSimRows, ReductionsMatchTheCpu) {
  const Tensor a = x(1);
  Tensor withnan = a.clone();
  if (M() > 1 && R() > 2) withnan.select(0, 1).select(0, R() / 2).fill_(std::nan(""));
  std::vector<Tensor> want{cpu_backend().sum_middle(a, M(), R(), 1),
                           cpu_backend().sum_middle(a, 1, M(), R())};
  for (const Tensor& t : cpu_backend().max_rows(withnan)) want.push_back(t);
  const Tensor f = a.to(DType::f32);
  want.push_back(cpu_backend().chunk_square_sums(f));
  const auto got = simulate([&](const SimExec& ex) {
    std::vector<Tensor> out{cuda::sum_middle(ex, a, M(), R(), 1),
                            cuda::sum_middle(ex, a, 1, M(), R())};
    for (const Tensor& t : cuda::max_rows(ex, withnan)) out.push_back(t);
    out.push_back(cuda::chunk_square_sums(ex, f));
    return out;
  });
  expect_same(got, want, "reductions");
}

TEST_P(CudaSimRows, SoftmaxForwardAndBackwardMatchTheCpu) {
  for (SoftmaxKind kind : {SoftmaxKind::softmax, SoftmaxKind::log_softmax}) {
    const Tensor a = x(2, -20, 20), g = x(3);
    const Tensor y = cpu_backend().softmax(kind, a);
    const std::vector<Tensor> want{y, cpu_backend().softmax_backward(kind, y, g)};
    const auto got = simulate([&](const SimExec& ex) {
      const Tensor gy = cuda::softmax(ex, kind, a);
      return std::vector<Tensor>{gy, cuda::softmax_backward(ex, kind, gy, g)};
    });
    expect_same(got, want, kind == SoftmaxKind::softmax ? "softmax" : "log_softmax");
  }
}

TEST_P(CudaSimRows, CrossEntropyMatchesTheCpu) {
  const Tensor logits = x(4, -8, 8);
  std::vector<int64_t> t(static_cast<size_t>(M()));
  for (int64_t n = 0; n < M(); ++n) t[size_t(n)] = n % 5 == 3 ? -100 : (n * 7) % R();
  const Tensor targets = Tensor::from_vector(t, {M()});
  const Tensor g = Tensor::scalar(0.75, dtype());
  const TargetCount want_count = cpu_backend().count_targets(targets, R(), -100);
  const TargetCount got_count = cuda::count_targets(SimExec(), targets, R(), -100);
  EXPECT_EQ(got_count.count, want_count.count);
  EXPECT_EQ(got_count.first_bad_row, want_count.first_bad_row);
  const Tensors ce = cpu_backend().cross_entropy(logits, targets, -100);
  std::vector<Tensor> want{ce[0], ce[1]};
  want.push_back(cpu_backend().cross_entropy_backward(logits, targets, ce[1], g, 3.0, -100));
  const auto got = simulate([&](const SimExec& ex) {
    const Tensors out = cuda::cross_entropy(ex, logits, targets, -100);
    return std::vector<Tensor>{
        out[0], out[1], cuda::cross_entropy_backward(ex, logits, targets, out[1], g, 3.0, -100)};
  });
  expect_same(got, want, "cross_entropy");
  t[size_t(M() / 2)] = R();
  const Tensor bad = Tensor::from_vector(t, {M()});
  EXPECT_EQ(cuda::count_targets(SimExec(), bad, R(), -100).first_bad_row,
            cpu_backend().count_targets(bad, R(), -100).first_bad_row);
}

TEST_P(CudaSimRows, NormsForwardAndBackwardMatchTheCpu) {
  const Tensor a = x(5), w = random_tensor({R()}, 6, dtype()), b = random_tensor({R()}, 7, dtype());
  const Tensor g = x(8);
  std::vector<Tensor> want;
  const Tensors rms = cpu_backend().rmsnorm(a, w, 1e-5);
  want.insert(want.end(), rms.begin(), rms.end());
  for (const Tensor& t : cpu_backend().rmsnorm_backward(a, w, rms[1], g, true, true))
    want.push_back(t);
  const Tensors ln = cpu_backend().layernorm(a, w, b, 1e-5);
  want.insert(want.end(), ln.begin(), ln.end());
  for (const Tensor& t : cpu_backend().layernorm_backward(a, w, ln[1], ln[2], g, true, true, true))
    want.push_back(t);
  const auto got = simulate([&](const SimExec& ex) {
    std::vector<Tensor> out;
    const Tensors r = cuda::rmsnorm(ex, a, w, 1e-5);
    out.insert(out.end(), r.begin(), r.end());
    for (const Tensor& t : cuda::rmsnorm_backward(ex, a, w, r[1], g, true, true)) out.push_back(t);
    const Tensors l = cuda::layernorm(ex, a, w, b, 1e-5);
    out.insert(out.end(), l.begin(), l.end());
    for (const Tensor& t : cuda::layernorm_backward(ex, a, w, l[1], l[2], g, true, true, true))
      out.push_back(t);
    return out;
  });
  expect_same(got, want, "norms");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaSimRows,
                         ::testing::Combine(::testing::Values(DType::f32, DType::f64),
                                            ::testing::Values(int64_t(1), int64_t(37)),
                                            ::testing::Values(int64_t(1), int64_t(16), int64_t(67),
                                                              int64_t(259))));

}  // namespace
}  // namespace reprise::testing
