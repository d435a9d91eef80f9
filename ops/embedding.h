#pragma once
// Embedding lookup. V = vocabulary size, C = embedding width.

#include <cstdint>
#include <optional>

#include "engine/tensor.h"

namespace reprise::ops {

// out[..., :] = weight[ids[...], :].
// weight: (V, C) f32/f64, ids: (...) i64 or i32 with values in [0, V)
// -> (..., C). The backward adds each output row's gradient into its id's
// row of dweight, every row by one thread in the order the ids appear, so
// repeated ids give the same bits for any thread count. With padding_idx
// (torch's): that row's gradient is 0, whatever ids hold it.
Tensor embedding(const Tensor& weight, const Tensor& ids,
                 std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace reprise::ops
