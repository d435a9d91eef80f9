#pragma once
// Running the CUDA backend's kernel drivers on the simulator (cuda/sim.h)
// and comparing with the CPU backend (same_bits: tests/support/gradcheck.h).

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cuda/sim.h"
#include "engine/tensor.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {

// The results of run(exec) with the simulator running threads and blocks in
// order; the test fails when running them in reverse order gives other bits
// (threads of a kernel that race).
std::vector<Tensor> simulate(const std::function<std::vector<Tensor>(const cuda::SimExec&)>& run);

// Each result bitwise equal to the reference's.
void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                 const std::string& what);

// Deterministic test data: uniform in [lo, hi), of `dtype`.
Tensor random_tensor(const Shape& shape, uint64_t seed, DType dtype = DType::f32, double lo = -2,
                     double hi = 2);

}  // namespace reprise::testing
