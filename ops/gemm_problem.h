#pragma once
// A batch of matrix products after ops/gemm.cpp has read the operands'
// layouts: `batch` products of (M, K) @ (K, N) into a contiguous
// (batch, M, N) output. Shared by the GEMM drivers (gemm.cpp and the f32
// AVX-512 kernel, sgemm_avx512.cpp).

#include <cstdint>
#include <vector>

namespace reprise::ops::detail {

// Products of fewer multiply-adds run on the calling thread: waking the
// other threads would cost more than it saves. It changes no bits.
inline constexpr double kParallelMacs = double(1 << 20);

inline int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }
inline int64_t round_up(int64_t n, int64_t d) { return ceil_div(n, d) * d; }

// How one operand's matrices lie in memory: each is row-major (column
// stride 1) or column-major (row stride 1) with leading dimension `outer`;
// matrix i of the batch starts at offsets[i].
struct Layout {
  bool row_major = true;
  int64_t outer = 1;
  std::vector<int64_t> offsets;
};

struct Problem {
  int64_t batch, M, N, K;
  int64_t a_rs, b_cs;  // steps to the tile origin: row i0 of a, column j0 of b
  Layout a, b;
};

}  // namespace reprise::ops::detail
