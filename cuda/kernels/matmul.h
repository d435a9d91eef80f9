#pragma once
// The matrix product a (..., M, K) @ b (..., K, N) -> contiguous (..., M, N),
// batch dims broadcast, as one strided batch of column-major products
// (cuda/gemm_problem.h): cuBLAS's C^T (N x M) = B^T A^T, reading each
// row-major operand as the transpose of a column-major one and each
// column-major one (a transposed view) as it is, so no operand is copied
// unless its matrices have no unit stride, or its batch does not step
// uniformly through memory (broadcast over some batch dims but not others).
// As on the CPU, (B, T, C) @ (C, N) folds into one (B T, C) @ (C, N)
// product when a's rows step uniformly.
//
// M = rows of a and of the output, K = the inner dim, N = columns of b.

#include <vector>

#include "cuda/gemm_problem.h"
#include "engine/strided_loop.h"
#include "engine/tensor.h"

namespace reprise::cuda {

// How a (rows, cols) matrix with strides (rs, cs) lies: row-major (column
// stride 1) or column-major (row stride 1), with leading dimension `ld`.
struct MatrixOrder {
  bool row_major;
  int64_t ld;
};

// The order of a matrix, or false when it has neither (cpu/gemm.cpp's
// rule: a dim of extent 1 may have any stride, the leading dimension
// covers a row or a column).
inline bool matrix_order(int64_t rows, int64_t cols, int64_t rs, int64_t cs, MatrixOrder& out) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
    out = {true, rows == 1 ? cols : rs};
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
    out = {false, cols == 1 ? rows : cs};
    return true;
  }
  return false;
}

// Offsets of each matrix of t over the broadcast batch shape (row-major
// batch index; stride 0 along broadcast dims).
inline std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t nb = int64_t(batch.size()), lead = nb - (t.dim() - 2);
  std::vector<int64_t> offsets(size_t(numel(batch)), 0);
  Shape idx(batch.size(), 0);
  for (int64_t& off : offsets) {
    for (int64_t d = lead; d < nb; ++d)
      off += t.size(d - lead) == 1 ? 0 : idx[size_t(d)] * t.stride(d - lead);
    for (int64_t d = nb - 1; d >= 0 && ++idx[size_t(d)] == batch[size_t(d)]; --d)
      idx[size_t(d)] = 0;
  }
  return offsets;
}

// The common step of offsets that step uniformly, or false.
inline bool uniform_step(const std::vector<int64_t>& offsets, int64_t& step) {
  step = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] != offsets[0] + int64_t(i) * step) return false;
  }
  return true;
}

template <class Exec>
Tensor matmul(const Exec& ex, const Tensor& a_in, const Tensor& b_in) {
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  const ProductShapes shapes = product_shapes(a_in.shape(), b_in.shape());
  const Shape &batch = shapes.batch, &batch_b = shapes.batch_b;
  Tensor out = Tensor::empty(shapes.out, a_in.dtype(), ex.device());
  if (out.numel() == 0) return out;
  NoGradGuard no_grad;  // the views below are plumbing
  if (K == 0) return out.zero_();

  MatrixOrder oa{}, ob{};
  Tensor a = matrix_order(M, K, a_in.stride(-2), a_in.stride(-1), oa) ? a_in : a_in.contiguous();
  Tensor b = matrix_order(K, N, b_in.stride(-2), b_in.stride(-1), ob) ? b_in : b_in.contiguous();
  matrix_order(M, K, a.stride(-2), a.stride(-1), oa);
  matrix_order(K, N, b.stride(-2), b.stride(-1), ob);

  int64_t rows = M, count = numel(batch), step_a = 0, step_b = 0;
  const Shape lead(a.shape().begin(), a.shape().end() - 1),
      lead_st(a.strides().begin(), a.strides().end() - 1);
  const StridedLayout<1> folded_rows = coalesce<1>(lead, {lead_st});
  MatrixOrder folded{};
  if (count > 1 && numel(batch_b) == 1 && folded_rows.shape.size() == 1 &&
      matrix_order(count * M, K, folded_rows.strides[0][0], a.stride(-1), folded)) {
    rows = count * M;
    count = 1;
    oa = folded;
  } else if (count > 1) {
    // Operands whose matrices do not step uniformly are laid out anew.
    Shape full = batch;
    full.push_back(0);
    full.push_back(0);
    if (!uniform_step(batch_offsets(a, batch), step_a)) {
      full[full.size() - 2] = M;
      full.back() = K;
      a = a.expand(full).contiguous();
      oa = {true, K};
      step_a = M * K;
    }
    if (!uniform_step(batch_offsets(b, batch), step_b)) {
      full[full.size() - 2] = K;
      full.back() = N;
      b = b.expand(full).contiguous();
      ob = {true, N};
      step_b = K * N;
    }
  }
  ex.gemm(GemmProblem{.dtype = a.dtype(),
                      .trans_a = !ob.row_major,
                      .trans_b = !oa.row_major,
                      .m = N,
                      .n = rows,
                      .k = K,
                      .batch = count,
                      .a = b.raw_data(),
                      .lda = ob.ld,
                      .stride_a = step_b,
                      .b = a.raw_data(),
                      .ldb = oa.ld,
                      .stride_b = step_a,
                      .c = out.raw_data(),
                      .ldc = N,
                      .stride_c = rows * N});
  return out;
}

}  // namespace reprise::cuda
