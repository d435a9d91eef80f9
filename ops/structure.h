#pragma once
// Structure ops as torch names them, composed of the recorded views, cat,
// index_select and where, so each is differentiable with no kernel of its
// own (the backward of each piece makes the whole one's).

#include <vector>

#include "engine/tensor.h"

namespace reprise::ops {

// x's lower (upper) triangle over its last two dims, (..., R, C): elements
// with column - row <= diagonal (>= for triu) are kept, the others 0.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ids (...) i32/i64 -> (..., num_classes) i64, 1 at each id. Every id must
// be in [0, num_classes); num_classes < 0 takes the largest id + 1.
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);

// torch's F.pad with mode "constant": pads[2 i], pads[2 i + 1] are the
// elements before and after the i-th dim counted from the last. A negative
// width crops.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0);

// x reversed along each of dims.
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);

// x shifted by shifts[i] along dims[i], wrapping around; with no dims, the
// flattened x by shifts[0], reshaped back.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims = {});

// x tiled repeats[i] times along dim i (torch's Tensor.repeat); repeats
// may have more entries than x has dims, which adds leading ones.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);

}  // namespace reprise::ops
