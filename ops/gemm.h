#pragma once
// The CPU matrix product under ops::matmul and ops::linear, for any op that
// needs one: a batch of strided matrices, computed by tiles of the output.
//
// M = rows of a and of the output, K = the inner dim, N = columns of b and of
// the output; "..." = batch dims, broadcast as in numpy.
//
// Results do not depend on the thread count. f32 products run on the
// AVX-512 kernel (ops/sgemm_avx512.h), where each element's sum runs over k
// in order, when the build has it; otherwise, and for f64, the output is cut
// into tiles chosen from the shapes alone and each is computed by one
// sequential GEMM call (Eigen's kernel, or single-threaded OpenBLAS when
// built with it: REPRISE_BLAS). The environment variable REPRISE_GEMM (read
// once) picks the f32 kernel: auto (the default: avx512 when built), avx512
// or eigen (the tiled Eigen/OpenBLAS path, for comparison).

#include "engine/tensor.h"

namespace reprise::ops::detail {

// a: (..., M, K), b: (..., K, N) -> contiguous (..., M, N) = a @ b, with the
// batch dims of a and b broadcast. Not recorded. f32 or f64 on the cpu, same
// dtype, both at least 2-D with matching K: the calling op checks these.
// Transposed views (column-major matrices) are read in place; only a matrix
// with neither a unit row nor a unit column stride, or with overlapping
// (e.g. broadcast, stride-0) rows or columns, is copied first.
Tensor matmul_kernel(const Tensor& a, const Tensor& b);

enum class GemmKernel { avx512, eigen };

// The kernel f32 products run on (see REPRISE_GEMM above), and its name for
// reports: "avx512", "openblas" or "eigen".
GemmKernel gemm_f32_kernel();
const char* gemm_f32_kernel_name();

}  // namespace reprise::ops::detail
