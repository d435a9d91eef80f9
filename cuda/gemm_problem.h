#pragma once
// One strided batch of matrix products in cuBLAS's terms (column-major):
//   C_i (m x n) = op(A_i) (m x k) op(B_i) (k x n),  i < batch,
// with op(X) = X or X^T, matrix i of X at x + i * stride_x. The matmul
// driver (cuda/kernels/matmul.h) turns reprise's row-major operands into
// one of these; cuBLASLt runs it on the GPU (cuda/matmul.cu), or, in the
// batch-invariant mode and on the simulator, one FMA chain per element over
// k from 0 (cuda/kernels/gemm_fma.h).

#include <cstdint>

#include "engine/dtype.h"

namespace reprise::cuda {

struct GemmProblem {
  DType dtype;  // of A, B and C (bf16 and f16 accumulate in f32)
  bool trans_a, trans_b;
  int64_t m, n, k, batch;
  const void* a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  void* c;
  int64_t ldc, stride_c;
};

}  // namespace reprise::cuda
