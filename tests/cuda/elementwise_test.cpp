// Data movement and elementwise kernels of the CUDA backend, simulated,
// against the CPU backend: the same bits, on strided and broadcast
// operands, in every supported dtype. (Every op in f32 and f64 is
// tests/ops/backends_test.cpp's; these are the layouts and dtypes beyond.)
#include "cuda/kernels/elementwise.h"

#include <gtest/gtest.h>

#include "cuda/kernels/copy.h"
#include "engine/backend.h"
#include "tests/cuda/sim_support.h"

namespace reprise::testing {
namespace {

using cuda::SimExec;

// A (5, 7) view with strides (1, 5): the transpose of a contiguous (7, 5).
Tensor transposed(uint64_t seed, DType dtype, double lo = -2, double hi = 2) {
  return random_tensor({7, 5}, seed, dtype, lo, hi).transpose(0, 1);
}

TEST(CudaSimCopy, ConvertsBetweenEveryPairOfDtypesAndLayouts) {
  const DType all[] = {DType::f32, DType::f64, DType::bf16,   DType::f16,
                       DType::i32, DType::i64, DType::boolean};
  for (DType from : all) {
    const Tensor src = transposed(1, DType::f64, -300, 300).to(from);
    for (DType to : all) {
      const Tensor want = Tensor::empty({5, 7}, to);
      cpu_backend().copy(want, src);
      const auto got = simulate([&](const SimExec& ex) {
        Tensor out = Tensor::empty({5, 7}, to);
        cuda::copy(ex, out, src);
        return std::vector<Tensor>{out};
      });
      expect_same(got, {want}, std::string(dtype_name(from)) + " -> " + dtype_name(to));
    }
  }
}

TEST(CudaSimCopy, FillsAStridedViewAndBroadcastsAScalar) {
  const auto got = simulate([&](const SimExec& ex) {
    Tensor t = Tensor::zeros({6, 8});
    cuda::fill(ex, t.slice(1, 1, 8, 3), 2.5);
    Tensor b = Tensor::empty({3, 4}, DType::f64);
    cuda::copy(ex, b, Tensor::scalar(-1.25).expand({3, 4}));
    return std::vector<Tensor>{t, b};
  });
  Tensor t = Tensor::zeros({6, 8});
  t.slice(1, 1, 8, 3).fill_(2.5);
  expect_same(got, {t, Tensor::full({3, 4}, -1.25, DType::f64)}, "fill");
}

TEST(CudaSimCopy, RepresentableFindsWhatDoesNotFit) {
  const Tensor ok = Tensor::from_vector<double>({-2147483648.5, 2147483647.5, 3}, {3});
  const Tensor nan = Tensor::from_vector<double>({1, std::nan(""), 2}, {3});
  const Tensor big = Tensor::from_vector<int64_t>({1, int64_t(1) << 40}, {2});
  for (const Tensor& x : {ok, nan, big}) {
    for (DType to : {DType::i32, DType::i64}) {
      EXPECT_EQ(cuda::representable(SimExec(), x, to), cpu_backend().representable(x, to))
          << x.describe() << " to " << dtype_name(to);
    }
  }
}

TEST(CudaSimElementwise, BinaryOpsOnBroadcastOperandsMatchTheCpu) {
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    const Tensor a = transposed(4, DType::f64, -50, 50).to(dtype);
    const Tensor b = random_tensor({1, 7}, 5, DType::f64, 1, 40).to(dtype).expand({5, 7});
    for (BinaryOp op : kBinaryOps) {
      const Tensor want = Tensor::empty({5, 7}, dtype);
      cpu_backend().binary(op, want, a, b);
      const auto got = simulate([&](const SimExec& ex) {
        Tensor out = Tensor::empty({5, 7}, dtype);
        cuda::binary(ex, op, out, a, b);
        return std::vector<Tensor>{out};
      });
      expect_same(got, {want}, std::string(binary_op_name(op)) + " " + dtype_name(dtype));
    }
  }
}

TEST(CudaSimElementwise, SwigluWhereAndPerturbMatchTheCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor gate = transposed(6, dtype, -6, 6), up = transposed(7, dtype),
                 dy = transposed(8, dtype);
    const Tensor cond = transposed(9, DType::f64, -1, 1).to(DType::boolean);
    std::vector<Tensor> want{cpu_backend().swiglu(gate, up)};
    for (const Tensor& t : cpu_backend().swiglu_backward(gate, up, dy)) want.push_back(t);
    want.push_back(cpu_backend().where(cond, gate, up));
    want.push_back(cpu_backend().perturb_ulps(gate, 3, 11));
    const auto got = simulate([&](const SimExec& ex) {
      std::vector<Tensor> out{cuda::swiglu(ex, gate, up)};
      for (const Tensor& t : cuda::swiglu_backward(ex, gate, up, dy)) out.push_back(t);
      out.push_back(cuda::where(ex, cond, gate, up));
      out.push_back(cuda::perturb_ulps(ex, gate, 3, 11));
      return out;
    });
    expect_same(got, want, dtype_name(dtype));
  }
  for (DType dtype : {DType::bf16, DType::f16}) {  // recompute noise on 16-bit products
    const Tensor x = transposed(10, DType::f32, -6, 6).to(dtype);
    const Tensor want = cpu_backend().perturb_ulps(x, 3, 11);
    const auto got = simulate(
        [&](const SimExec& ex) { return std::vector<Tensor>{cuda::perturb_ulps(ex, x, 3, 11)}; });
    expect_same(got, {want}, dtype_name(dtype));
  }
}

}  // namespace
}  // namespace reprise::testing
