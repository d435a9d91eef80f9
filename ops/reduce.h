#pragma once
// Reductions. Each output element is summed by one thread in a fixed
// order, so results do not depend on the thread count.

#include <vector>

#include "engine/tensor.h"

namespace reprise::ops {

// Sum over `dims` (all dims when empty).  x: any shape -> reduced shape.
Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);

struct MaxResult {
  Tensor values;   // float, differentiable
  Tensor indices;  // i64, position of the first maximum along dim
};
// Maximum along one dim. NaN propagates (a NaN is the maximum).
MaxResult max(const Tensor& x, int64_t dim, bool keepdim = false);

namespace detail {
// Sums g over the dims that broadcasting expanded, giving `shape` back:
// the backward of every broadcasting op.  g: broadcast shape -> shape.
Tensor sum_to_shape(const Tensor& g, const Shape& shape);
// Non-recording sum kernel (the forward of ops::sum).
Tensor sum_kernel(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
}  // namespace detail

}  // namespace reprise::ops
