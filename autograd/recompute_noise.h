#pragma once
// Noise injection for study: emulates recompute kernels that are not bit
// exact (atomics, split-K reductions on GPUs) by moving each element of a
// replayed floating output by up to k units in the last place.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::autograd {

// A copy of t (f32, f64, bf16 or f16) with every element moved by d ulps of
// its dtype, d uniform in [-k, k] and drawn from a hash of (seed, salt,
// element index): the same call perturbs the same way. Other dtypes are returned unchanged; inf and
// NaN are left alone.
Tensor perturb_ulps(const Tensor& t, int k, uint64_t seed, uint64_t salt);

}  // namespace reprise::autograd
