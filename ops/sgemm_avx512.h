#pragma once
// The f32 matrix product on AVX-512, reprise's own kernel under
// ops::matmul and ops::linear on CPUs that have it.
//
// B is packed once per product into panels of 32 columns, A once per row
// block into panels of 12 rows, and a 12 x 32 micro-kernel keeps its block
// of C in 24 vector registers. Each output element adds its K products in
// order of k, starting from zero, one FMA each, so its bits depend on its
// row of A and its column of B alone: not on the tiling, the thread count or
// how the operands lie in memory.

#include "ops/gemm_problem.h"

namespace reprise::ops::detail {

// Whether this build has the kernel (compiled for a CPU with AVX-512F).
bool sgemm_avx512_built();

// c (p.batch, p.M, p.N) = a @ b as p describes them. Requires
// sgemm_avx512_built().
void sgemm_avx512(const Problem& p, const float* a, const float* b, float* c);

}  // namespace reprise::ops::detail
