#pragma once
// Gradient accumulation primitives used by the backward engine and by
// optimizers: elementwise sums of same-shape floating tensors.

#include "engine/tensor.h"

namespace reprise {

// dst += src, elementwise; same shape and dtype; bumps dst's version.
void accumulate_(Tensor& dst, const Tensor& src);

// a + b into a new contiguous tensor; same shape and dtype.
Tensor sum_of(const Tensor& a, const Tensor& b);

}  // namespace reprise
