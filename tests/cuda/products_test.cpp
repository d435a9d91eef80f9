// Matrix products of the CUDA backend, simulated, against the CPU backend.
// The simulator runs a product with the FMA-chain kernel
// (cuda/kernels/gemm_fma.h), one chain per element over k from 0, the CPU's
// definition, so these check the layout logic (transposed, strided,
// broadcast and folded operands) bit for bit, and that the kernel is
// batch-invariant, as the batch-invariant mode needs on a device (where
// cuBLASLt computes products otherwise). Attention is
// tests/cuda/attention_test.cpp.
#include <gtest/gtest.h>

#include "cuda/kernels/matmul.h"
#include "engine/backend.h"
#include "engine/cuda_matmul.h"
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

// A row's product is the same alone (a decode, M = 1), among 37 rows (a
// training forward) and inside a batch of matrices, in every dtype.
TEST(CudaSimMatmul, TheFmaChainKernelIsBatchInvariant) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const Tensor a = random_tensor({37, 29}, 7, DType::f32).to(dtype);
    const Tensor w = random_tensor({29, 11}, 8, DType::f32).to(dtype);
    const auto all = simulate([&](const SimExec& ex) {
      return std::vector<Tensor>{cuda::matmul(ex, a, w),
                                 cuda::matmul(ex, a.reshape({37, 1, 29}), w)};
    });
    for (int64_t r : {0, 5, 36}) {
      const auto one = simulate([&](const SimExec& ex) {
        return std::vector<Tensor>{cuda::matmul(ex, a.slice(0, r, r + 1).contiguous(), w)};
      });
      expect_same(one, {all[0].slice(0, r, r + 1)},
                  std::string(dtype_name(dtype)) + " row " + std::to_string(r));
      expect_same(one, {all[1].select(0, r)},
                  std::string(dtype_name(dtype)) + " batched row " + std::to_string(r));
    }
  }
}

TEST(CudaMatmulMode, NamesParseAndAnUnknownOneIsAnError) {
  EXPECT_EQ(parse_cuda_matmul("cublas", "test"), CudaMatmul::cublas);
  EXPECT_EQ(parse_cuda_matmul("fma_chain", "test"), CudaMatmul::fma_chain);
  EXPECT_STREQ(to_string(CudaMatmul::fma_chain), "fma_chain");
  const CudaMatmul before = cuda_matmul();
  set_cuda_matmul(CudaMatmul::fma_chain);
  EXPECT_EQ(cuda_matmul(), CudaMatmul::fma_chain);
  set_cuda_matmul(before);
  try {
    parse_cuda_matmul("tf32", "REPRISE_CUDA_MATMUL");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("REPRISE_CUDA_MATMUL: unknown CUDA matmul mode 'tf32'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace reprise::testing
