#pragma once
// Embedding lookup. V = vocabulary size, C = embedding width.

#include "engine/tensor.h"

namespace reprise::ops {

// out[..., :] = weight[ids[...], :].
// weight: (V, C) f32/f64, ids: (...) i64 or i32 with values in [0, V)
// -> (..., C). The backward adds each output row's gradient into its id's
// row of dweight, every row by one thread in the order the ids appear, so
// repeated ids give the same bits for any thread count.
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace reprise::ops
