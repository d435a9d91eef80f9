// cumsum (ops/reduce.h): running sums added in order, bit for bit against a
// serial loop at any thread count and on the CUDA simulator; integers;
// bad input. Its gradient checks are cases in tests/cases/elementwise.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "engine/threads.h"
#include "ops/reduce.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/support/cuda_sim_backend.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

// The running sums of x (rows, n) along dim 1, by a plain loop.
std::vector<float> serial_cumsum(const std::vector<float>& x, int64_t rows, int64_t n) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t at = size_t(r * n + i);
      s = i == 0 ? x[at] : s + x[at];
      out[at] = s;
    }
  }
  return out;
}

TEST(Cumsum, AddsInOrderAtAnyThreadCountAndOnTheSimulator) {
  const int64_t rows = 5, n = 3000;
  const Tensor x = uniform({rows, n}, -1, 1, 11, DType::f32);
  const Tensor want = Tensor::from_vector(serial_cumsum(x.to_vector<float>(), rows, n), {rows, n});
  const int before = threads::num_threads();
  for (int t : {1, 2}) {
    threads::set_num_threads(t);
    EXPECT_TRUE(same_bits(ops::cumsum(x, 1), want)) << t << " threads";
    // Along dim 0 of the transpose: the same sums, column by column.
    EXPECT_TRUE(same_bits(ops::transpose(ops::cumsum(ops::transpose(x, 0, 1), 0), 0, 1), want));
  }
  threads::set_num_threads(before);
  CudaSimBackend in_order(false), reversed(true);
  for (CudaSimBackend* sim : {&in_order, &reversed}) {
    ScopedCpuBackend use(*sim);
    EXPECT_TRUE(same_bits(ops::cumsum(x, -1), want)) << sim->name();
    EXPECT_TRUE(same_bits(ops::transpose(ops::cumsum(ops::transpose(x, 0, 1), 0), 0, 1), want))
        << sim->name();
  }
}

// Positions from an attention mask, as research code makes them.
TEST(Cumsum, IntegersSumInI64) {
  const Tensor mask = Tensor::from_vector<int32_t>({0, 0, 1, 1, 1, 1, 1, 1, 0, 1}, {2, 5});
  const Tensor positions = ops::cumsum(mask, 1);
  EXPECT_EQ(positions.dtype(), DType::i64);
  EXPECT_EQ(positions.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 2, 3, 1, 2, 3, 3, 4}));
  EXPECT_EQ(ops::cumsum(Tensor::from_vector<int64_t>({1, 2, 3}, {3}), -1).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(ops::cumsum(Tensor::zeros({0, 4}), 0).shape(), (Shape{0, 4}));
}

TEST(Cumsum, RejectsBadInput) {
  expect_error([] { ops::cumsum(Tensor::zeros({3}).to(DType::boolean), 0); },
               {"cumsum", "bool", "expected x of dtype f32, f64, i32 or i64"});
  expect_error([] { ops::cumsum(Tensor::zeros({3}, DType::bf16), 0); }, {"cumsum", "bf16"});
  expect_error([] { ops::cumsum(Tensor::zeros({2, 3}), 2); }, {"cumsum", "2"});
}

}  // namespace
}  // namespace reprise::testing
