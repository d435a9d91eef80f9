#pragma once
// Matrix products with backward rules. M = rows, K = inner dim, N = columns;
// "..." = batch dims, broadcast as in numpy. f32, f64, bf16 or f16, both
// operands of one dtype and the result of that dtype; the product is the
// backend's (Backend::matmul: on the CPU each element is the sequential FMA
// chain over k, so its bits depend on neither the thread count nor the CPU
// capability; bf16 and f16 accumulate in f32 and round once to the result).
// Gradients have the operands' dtype. Transposed views are read in place,
// without copies.

#include "engine/tensor.h"

namespace reprise::ops {

// a: (..., M, K), b: (K, N) or (..., K, N) -> (..., M, N); the batch dims
// of a and b broadcast. Both must be at least 2-D (1-D operands, which
// torch.matmul treats as vectors, raise: unsqueeze them to (1, K) or (K, 1)).
Tensor matmul(const Tensor& a, const Tensor& b);

// x: (..., K), w: (N, K) -> (..., N) = x @ w^T, without a bias: the
// projection of a Linear layer with PyTorch's (out, in) weight layout.
Tensor linear(const Tensor& x, const Tensor& w);

}  // namespace reprise::ops
