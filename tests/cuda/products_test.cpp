// Matrix products of the CUDA backend, simulated, against the CPU backend.
// The simulator runs a product as one FMA chain per element over k from 0,
// the CPU's definition, so these check the layout logic (transposed,
// strided, broadcast and folded operands) bit for bit; on a GPU cuBLASLt
// computes them. Attention is tests/cuda/attention_test.cpp.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace reprise::testing
