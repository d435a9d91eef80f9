#pragma once
// Comparisons and logic, as torch's: results are bool tensors of the
// operands' broadcast shape, with no gradient. They are not recorded: a
// mask made inside a checkpoint region and read by a recorded op (where,
// masked_fill) is held as one of the region's inputs, a byte an element.

#include "engine/elementwise_ops.h"
#include "engine/tensor.h"

namespace reprise::ops {

// a op b, broadcast; a and b of one dtype (any) and device.
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
// x op s. s must be a value of x's dtype: an integral one for an integer
// tensor, 0 or 1 for a bool one (there is no type promotion).
Tensor compare(CompareOp op, const Tensor& x, double s);

#define REPRISE_DECLARE_COMPARE(name, ...)       \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& x, double s);
REPRISE_COMPARE_OPS(REPRISE_DECLARE_COMPARE)
#undef REPRISE_DECLARE_COMPARE

// x != x: where x is NaN (false everywhere for a non-floating x).
Tensor isnan(const Tensor& x);

// Logic on bool tensors, broadcast.
Tensor logical_not(const Tensor& a);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

}  // namespace reprise::ops
