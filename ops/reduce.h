#pragma once
// Reductions and running sums. Each output element is summed by one thread
// in a fixed order, so results do not depend on the thread count.

#include <optional>
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

// Running sum along dim: out[..., i, ...] = x[..., 0, ...] + ... +
// x[..., i, ...], added in that order.  x: f32/f64/i32/i64 (i32 sums in
// i64, as torch's) -> x's shape. The gradient is the running sum of g
// from the end.
Tensor cumsum(const Tensor& x, int64_t dim);

// ---- composed of the reductions above and elementwise ops ----
// Dims are torch's: `dims` empty means every dim; a negative one counts
// from the end.

// Largest (smallest) element over `dims`, NaN where a NaN is. The gradient
// goes to one element per reduced slice, the first extreme (torch's amax
// shares it among ties).
Tensor amax(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// Minimum along one dim: values and the first index of each.
MaxResult min(const Tensor& x, int64_t dim, bool keepdim = false);
// i64 index of the first maximum (minimum) along dim; over the flattened
// tensor without one (keepdim then keeps every dim, at size 1).
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// log(sum(exp(x))) over dims, computed as m + log(sum(exp(x - m))) with m
// the slice's maximum (0 where that is infinite), so it neither overflows
// nor turns -inf into NaN.
Tensor logsumexp(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
// sum((x - mean)^2) / (n - correction) over dims (n: the elements reduced
// per slice); correction 1 is Bessel's, torch's default. std is its root.
Tensor var(const Tensor& x, std::vector<int64_t> dims = {}, double correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& x, std::vector<int64_t> dims = {}, double correction = 1,
           bool keepdim = false);

namespace detail {
// Sums g over the dims that broadcasting expanded, giving `shape` back:
// the backward of every broadcasting op.  g: broadcast shape -> shape.
Tensor sum_to_shape(const Tensor& g, const Shape& shape);
// Non-recording sum kernel (the forward of ops::sum).
Tensor sum_kernel(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
}  // namespace detail

}  // namespace reprise::ops
