#pragma once
// Shapes and strides are small vectors of int64 extents, in elements.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace reprise {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string to_string(const Shape& shape);  // "[3, 5, 7]"

// Numpy broadcasting of two shapes; raises an Error naming `op` when the
// shapes are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// The shapes of a batched product (..., M, K) @ (..., K, N): each operand's
// batch dims, their broadcast, and the output's (..., M, N).
struct ProductShapes {
  Shape batch_a, batch_b, batch, out;
};
ProductShapes product_shapes(const Shape& a, const Shape& b);

// Wraps a possibly negative dim into [0, ndim); raises naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace reprise
