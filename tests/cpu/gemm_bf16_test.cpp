// The CPU's bf16 matrix product (cpu/gemm_bf16.cpp) through ops::matmul:
// every output element is bit for bit the paired chain that AVX512-BF16's
// vdpbf16ps computes (per pair of k, the odd product first, each step an
// FMA with denormals flushed; the f32 sum rounded once to bf16), at every
// CPU capability (avx512_bf16 on the instruction, the others emulating it),
// whatever the storage order of a and b, the batch, the tile edges, an odd
// K, blocks of k and the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "engine/threads.h"
#include "ops/matmul.h"
#include "tests/support/bf16_product.h"
#include "tests/support/capabilities.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

// bf16 values with exponents spread over 2^-20 .. 2^20, every 23rd one
// denormal and every 31st a signed zero, so that cancellation, rounding
// and the flushes all occur.
Tensor spread_bf16(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::ldexp(normal(rng), int(rng() % 41) - 20);
    if (i % 23 == 5) v[i] = normal(rng) * 1e-39f;
    if (i % 31 == 7) v[i] = i % 2 ? -0.0f : 0.0f;
  }
  return Tensor::from_vector(v, shape).to(DType::bf16);
}

class GemmBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kHaveBf16Reference) GTEST_SKIP() << "the reference sets the x86 FPU's flush modes";
    before_ = threads::num_threads();
  }
  void TearDown() override { threads::set_num_threads(before_); }

 private:
  int before_ = 1;
};

TEST_F(GemmBf16, EveryElementIsThePairedChain) {
  struct Dims {
    int64_t batch, M, K, N;
  };
  // Rows of 1, 4 and 12-row tiles, odd K, column panels cut short, K cut
  // into blocks (more than 1536 deep).
  for (Dims d :
       {Dims{1, 1, 1, 1}, Dims{1, 1, 301, 70}, Dims{2, 3, 17, 33}, Dims{1, 4, 600, 530},
        Dims{1, 5, 40, 16}, Dims{1, 13, 257, 33}, Dims{3, 25, 601, 70}, Dims{1, 300, 5, 530},
        Dims{2, 12, 256, 32}, Dims{1, 520, 300, 97}, Dims{1, 30, 1601, 40}, Dims{2, 3, 3001, 35}}) {
    Tensor a = spread_bf16({d.batch, d.M, d.K}, 81);
    Tensor b = spread_bf16({d.batch, d.K, d.N}, 82);
    const Tensor expected = bf16_reference_product(a, b);
    Tensor a_cm = a.transpose(1, 2).contiguous().transpose(1, 2);
    Tensor b_cm = b.transpose(1, 2).contiguous().transpose(1, 2);
    for_each_capability([&](CpuCapability c) {
      for (int nt : {1, 2, 3}) {
        threads::set_num_threads(nt);
        for (const Tensor& x : {a, a_cm}) {
          for (const Tensor& y : {b, b_cm}) {
            EXPECT_TRUE(same_bits(ops::matmul(x, y), expected))
                << d.batch << "x" << d.M << "x" << d.K << "x" << d.N << ", " << to_string(c) << ", "
                << nt << " threads, a strides " << to_string(x.strides()) << ", b strides "
                << to_string(y.strides());
          }
        }
      }
    });
  }
}

// One b for a batch of a (folded into one tall product), and linear's
// transposed weight.
TEST_F(GemmBf16, FoldedBatchAndLinearAreThePairedChain) {
  Tensor a = spread_bf16({4, 50, 301}, 83);
  Tensor b = spread_bf16({301, 90}, 84);
  const Tensor expected = bf16_reference_product(a, b);
  for_each_capability([&](CpuCapability c) {
    EXPECT_TRUE(same_bits(ops::matmul(a, b), expected)) << to_string(c);
    EXPECT_TRUE(same_bits(ops::linear(a, b.transpose(0, 1).contiguous()), expected))
        << to_string(c);
  });
}

// Infinities and NaN travel as the chain carries them; padding (zeros)
// never reaches the output.
TEST_F(GemmBf16, NonFiniteValuesPropagateAsTheChainDoes) {
  for (int64_t M : {14, 3}) {
    Tensor a = spread_bf16({1, M, 21}, 85);
    Tensor b = spread_bf16({1, 21, 35}, 86);
    NoGradGuard no_grad;
    a.select(0, 0).select(0, 1).select(0, 5).fill_(std::numeric_limits<double>::infinity());
    a.select(0, 0).select(0, M - 1).select(0, 20).fill_(std::numeric_limits<double>::quiet_NaN());
    b.select(0, 0).select(0, 7).select(0, 34).fill_(-std::numeric_limits<double>::infinity());
    const Tensor expected = bf16_reference_product(a, b);
    for_each_capability([&](CpuCapability c) {
      EXPECT_TRUE(same_bits(ops::matmul(a, b), expected)) << to_string(c) << ", M " << M;
    });
  }
}

}  // namespace
}  // namespace reprise::testing
