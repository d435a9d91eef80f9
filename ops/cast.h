#pragma once
// Dtype conversion.

#include "engine/tensor.h"

namespace reprise::ops {

// x converted to `dtype`, same shape (a new contiguous tensor; x itself,
// under a new handle, when the dtype already matches).  x: any shape.
//
// Between floating dtypes (f32, f64, bf16, f16) the cast is differentiable:
// the gradient is cast back to x's dtype. To or from i32/i64/bool it is
// not. Rounding:
//   - to bf16/f16: round to nearest, ties to even, of the exact source
//     value (f64 and integer sources are rounded once, not through f32);
//     NaN stays NaN, values past the largest finite number become inf;
//   - to f32 or f64 from a wider or an integer type: round to nearest,
//     ties to even;
//   - to i32/i64: truncation toward zero; NaN, inf and values outside the
//     target range raise an Error naming the value (so does an i64 -> i32
//     value outside i32);
//   - to bool: nonzero (NaN included) is true.
Tensor cast(const Tensor& x, DType dtype);

}  // namespace reprise::ops
