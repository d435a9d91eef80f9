#pragma once
// Deterministic case inputs, from a fixed LCG that is independent of the
// rng layer, so no change there moves a test's or a benchmark's data.

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace reprise::testing {

// Values uniform on [lo, hi).
Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed, DType dtype = DType::f64);
// An f64 leaf that requires grad.
Tensor param(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);
// An f32 input for a perf set, on [lo, hi).
Tensor perf_input(const Shape& shape, uint64_t seed, double lo = -4.0, double hi = 4.0);

// Indices uniform in [0, hi).
Tensor indices(const Shape& shape, int64_t hi, uint64_t seed, DType dtype = DType::i64);
// The given i64 values, as a 1-d tensor or in `shape`.
Tensor i64(const std::vector<int64_t>& values);
Tensor i64(const std::vector<int64_t>& values, const Shape& shape);
// Class targets for N rows of C classes, every third row set to `ignored`.
Tensor targets_with_ignored(int64_t N, int64_t C, int64_t ignored);
// Booleans, each true with probability 1/2.
Tensor mask(const Shape& shape, uint64_t seed);

}  // namespace reprise::testing
