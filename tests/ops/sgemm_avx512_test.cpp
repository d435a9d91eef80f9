// The f32 AVX-512 GEMM (ops/sgemm_avx512.h) through ops::matmul: every
// output element is bit for bit the sequential FMA chain over k, whatever
// the storage order of a and b, the batch, the tile edges (12-row and
// 32-column panels, 256-deep k blocks) and the thread count.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/threads.h"
#include "ops/gemm.h"
#include "ops/matmul.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

// c[i][j] = fma(a[i][K-1], b[K-1][j], ... fma(a[i][0], b[0][j], 0)), per
// matrix of a (batch, M, K) and b (batch, K, N), both contiguous f32.
std::vector<float> fma_chains(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  std::vector<float> c(size_t(batch * M * N));
  for (int64_t m = 0; m < batch; ++m) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k)
          acc = std::fma(pa[(m * M + i) * K + k], pb[(m * K + k) * N + j], acc);
        c[size_t((m * M + i) * N + j)] = acc;
      }
    }
  }
  return c;
}

// Equal bits, or both NaN.
::testing::AssertionResult same_bits(const std::vector<float>& actual,
                                     const std::vector<float>& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < actual.size(); ++i) {
    const bool both_nan = std::isnan(actual[i]) && std::isnan(expected[i]);
    if (!both_nan && std::bit_cast<uint32_t>(actual[i]) != std::bit_cast<uint32_t>(expected[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual[i] << " vs the FMA chain's " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

class SgemmAvx512 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ops::detail::gemm_f32_kernel() != ops::detail::GemmKernel::avx512)
      GTEST_SKIP() << "f32 products run on " << ops::detail::gemm_f32_kernel_name();
    before_ = threads::num_threads();
  }
  void TearDown() override { threads::set_num_threads(before_); }

 private:
  int before_ = 1;
};

TEST_F(SgemmAvx512, EveryElementIsTheSequentialFmaChain) {
  struct Dims {
    int64_t batch, M, K, N;
  };
  for (Dims d : {Dims{1, 1, 1, 1}, Dims{1, 13, 257, 33}, Dims{3, 25, 600, 70}, Dims{1, 300, 5, 530},
                 Dims{2, 12, 256, 32}, Dims{1, 50, 40, 700}, Dims{1, 520, 300, 97}}) {
    Tensor a = uniform({d.batch, d.M, d.K}, -1, 1, 71, DType::f32);
    Tensor b = uniform({d.batch, d.K, d.N}, -1, 1, 72, DType::f32);
    const std::vector<float> expected = fma_chains(a, b);
    // The same values column-major, read through transposed views.
    Tensor a_cm = a.transpose(1, 2).contiguous().transpose(1, 2);
    Tensor b_cm = b.transpose(1, 2).contiguous().transpose(1, 2);
    for (int nt : {1, 2, 3}) {
      threads::set_num_threads(nt);
      for (const Tensor& x : {a, a_cm}) {
        for (const Tensor& y : {b, b_cm}) {
          EXPECT_TRUE(same_bits(ops::matmul(x, y).to_vector<float>(), expected))
              << d.batch << "x" << d.M << "x" << d.K << "x" << d.N << ", " << nt
              << " threads, a strides " << to_string(x.strides()) << ", b strides "
              << to_string(y.strides());
        }
      }
    }
  }
}

// One b for a batch of a: the batch folds into one tall product.
TEST_F(SgemmAvx512, FoldedBatchIsTheSequentialFmaChain) {
  Tensor a = uniform({4, 100, 300}, -1, 1, 73, DType::f32);
  Tensor b = uniform({300, 90}, -1, 1, 74, DType::f32);
  const std::vector<float> expected = fma_chains(a.reshape({1, 400, 300}), b.reshape({1, 300, 90}));
  EXPECT_TRUE(same_bits(ops::matmul(a, b).to_vector<float>(), expected));
  EXPECT_TRUE(
      same_bits(ops::linear(a, b.transpose(0, 1).contiguous()).to_vector<float>(), expected));
}

// Infinities and NaN travel as the FMA chain carries them; padding lanes
// (zeros) never reach the output.
TEST_F(SgemmAvx512, NonFiniteValuesPropagateAsTheChainDoes) {
  Tensor a = uniform({1, 14, 20}, -1, 1, 75, DType::f32);
  Tensor b = uniform({1, 20, 35}, -1, 1, 76, DType::f32);
  float* pa = a.data<float>();
  float* pb = b.data<float>();
  pa[3 * 20 + 5] = std::numeric_limits<float>::infinity();
  pa[13 * 20 + 19] = std::numeric_limits<float>::quiet_NaN();
  pb[7 * 35 + 34] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(same_bits(ops::matmul(a, b).to_vector<float>(), fma_chains(a, b)));
}

}  // namespace
}  // namespace reprise::testing
