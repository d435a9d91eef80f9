#pragma once
// Joining and splitting tensors along a dim: cat, split, stack. Any dtype;
// gradients flow through the floating ones. split returns views of its input
// (no copy); cat and stack copy into one new contiguous tensor.

#include <concepts>
#include <vector>

#include "engine/tensor.h"

namespace reprise::ops {

// Concatenates along `dim`; the tensors agree in dtype, device and every
// other dim.  tensors[i]: (..., N_i, ...) -> (..., sum_i N_i, ...)
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);

// Splits along `dim` into pieces of the given sizes, which sum to
// x.size(dim).  x: (..., N, ...) -> [(..., sizes[i], ...)], views of x.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);

// Splits along `dim` into pieces of `split_size` (the last one smaller when
// it does not divide x.size(dim)).  x: (..., N, ...) -> ceil(N / split_size)
// views of x. A template so that a one-element brace list, split(x, {n}, d),
// picks the list of sizes above instead of converting to a chunk size.
template <std::integral I>
std::vector<Tensor> split(const Tensor& x, I split_size, int64_t dim);

// Stacks same-shape tensors along a new dim.  tensors[i]: S -> S with n
// inserted at dim (dim in [-S.size()-1, S.size()]).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

namespace detail {
// The sizes split(x, split_size, dim) cuts x.size(dim) into.
std::vector<int64_t> chunk_sizes(const Tensor& x, int64_t split_size, int64_t dim);
}  // namespace detail

template <std::integral I>
std::vector<Tensor> split(const Tensor& x, I split_size, int64_t dim) {
  return split(x, detail::chunk_sizes(x, int64_t(split_size), dim), dim);
}

}  // namespace reprise::ops
