#pragma once
// A grouped matmul: consecutive row blocks of x, each times its own weight
// (the experts of a mixture of experts run as one recorded op).
//
// M = rows, K = in features, N = out features, E = groups.

#include <vector>

#include "engine/tensor.h"

namespace reprise::ops {

// x: (M, K), counts: (E) i64 >= 0 summing to M, weights: E tensors (N, K)
// -> (M, N), rows [o_e, o_e + counts[e]) = x[o_e : o_e + counts[e]] @
// weights[e]^T with o_e = sum(counts[:e]). Any floating dtype (bf16
// and f16 accumulate in f32), one for all. Each
// block is one Backend::matmul product (bits independent of the thread
// count); an empty block costs nothing and its weight gets a zero gradient.
Tensor grouped_linear(const Tensor& x, const Tensor& counts, const std::vector<Tensor>& weights);

}  // namespace reprise::ops
