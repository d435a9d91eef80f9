// The CPU matrix product (cpu/gemm.cpp) through ops::matmul: every output
// element is bit for bit the sequential FMA chain over k, in f32 and f64,
// at every CPU capability, whatever the storage order of a and b, the
// batch, the tile edges (6- or 12-row and 8-, 16- or 32-column panels,
// 256-deep k blocks), products of at most 4 rows (read in place) and the
// thread count.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/threads.h"
#include "ops/matmul.h"
#include "tests/support/capabilities.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

// c[i][j] = fma(a[i][K-1], b[K-1][j], ... fma(a[i][0], b[0][j], 0)), per
// matrix of a (batch, M, K) and b (batch, K, N), both contiguous, as f64
// values of their dtype's chain.
std::vector<double> fma_chains(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  std::vector<double> c(size_t(batch * M * N));
  dispatch_float(a.dtype(), "fma_chains", [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    for (int64_t m = 0; m < batch; ++m) {
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          T acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc = std::fma(pa[(m * M + i) * K + k], pb[(m * K + k) * N + j], acc);
          c[size_t((m * M + i) * N + j)] = double(acc);
        }
      }
    }
  });
  return c;
}

// Equal bits, or both NaN (the values are exact in f64).
::testing::AssertionResult same_bits(const std::vector<double>& actual,
                                     const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < actual.size(); ++i) {
    const bool both_nan = std::isnan(actual[i]) && std::isnan(expected[i]);
    if (!both_nan && std::bit_cast<uint64_t>(actual[i]) != std::bit_cast<uint64_t>(expected[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual[i] << " vs the FMA chain's " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

class Gemm : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { before_ = threads::num_threads(); }
  void TearDown() override { threads::set_num_threads(before_); }

 private:
  int before_ = 1;
};

TEST_P(Gemm, EveryElementIsTheSequentialFmaChain) {
  struct Dims {
    int64_t batch, M, K, N;
  };
  // The thin path (at most 4 rows, B read in place) and the tiled one.
  for (Dims d :
       {Dims{1, 1, 1, 1}, Dims{1, 1, 300, 70}, Dims{2, 3, 17, 33}, Dims{1, 4, 600, 530},
        Dims{1, 5, 40, 16}, Dims{1, 13, 257, 33}, Dims{3, 25, 600, 70}, Dims{1, 300, 5, 530},
        Dims{2, 12, 256, 32}, Dims{1, 50, 40, 700}, Dims{1, 520, 300, 97}}) {
    Tensor a = uniform({d.batch, d.M, d.K}, -1, 1, 71, GetParam());
    Tensor b = uniform({d.batch, d.K, d.N}, -1, 1, 72, GetParam());
    const std::vector<double> expected = fma_chains(a, b);
    // The same values column-major, read through transposed views.
    Tensor a_cm = a.transpose(1, 2).contiguous().transpose(1, 2);
    Tensor b_cm = b.transpose(1, 2).contiguous().transpose(1, 2);
    for_each_capability([&](CpuCapability c) {
      for (int nt : {1, 2, 3}) {
        threads::set_num_threads(nt);
        for (const Tensor& x : {a, a_cm}) {
          for (const Tensor& y : {b, b_cm}) {
            EXPECT_TRUE(same_bits(ops::matmul(x, y).to_vector<double>(), expected))
                << d.batch << "x" << d.M << "x" << d.K << "x" << d.N << ", " << to_string(c) << ", "
                << nt << " threads, a strides " << to_string(x.strides()) << ", b strides "
                << to_string(y.strides());
          }
        }
      }
    });
  }
}

// One b for a batch of a: the batch folds into one tall product.
TEST_P(Gemm, FoldedBatchIsTheSequentialFmaChain) {
  Tensor a = uniform({4, 100, 300}, -1, 1, 73, GetParam());
  Tensor b = uniform({300, 90}, -1, 1, 74, GetParam());
  const std::vector<double> expected =
      fma_chains(a.reshape({1, 400, 300}), b.reshape({1, 300, 90}));
  for_each_capability([&](CpuCapability c) {
    EXPECT_TRUE(same_bits(ops::matmul(a, b).to_vector<double>(), expected)) << to_string(c);
    EXPECT_TRUE(
        same_bits(ops::linear(a, b.transpose(0, 1).contiguous()).to_vector<double>(), expected))
        << to_string(c);
  });
}

// Infinities and NaN travel as the FMA chain carries them; padding lanes
// (zeros) never reach the output.
TEST_P(Gemm, NonFiniteValuesPropagateAsTheChainDoes) {
  for (int64_t M : {14, 4}) {  // tiled, and read in place
    Tensor a = uniform({1, M, 20}, -1, 1, 75, GetParam());
    Tensor b = uniform({1, 20, 35}, -1, 1, 76, GetParam());
    NoGradGuard no_grad;
    a.select(0, 0).select(0, 3).select(0, 5).fill_(std::numeric_limits<double>::infinity());
    a.select(0, 0).select(0, M - 1).select(0, 19).fill_(std::numeric_limits<double>::quiet_NaN());
    b.select(0, 0).select(0, 7).select(0, 34).fill_(-std::numeric_limits<double>::infinity());
    for_each_capability([&](CpuCapability c) {
      EXPECT_TRUE(same_bits(ops::matmul(a, b).to_vector<double>(), fma_chains(a, b)))
          << to_string(c) << ", M " << M;
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Gemm, ::testing::Values(DType::f32, DType::f64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace reprise::testing
