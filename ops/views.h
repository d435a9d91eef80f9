#pragma once
// Differentiable layout ops. Outputs are views sharing the input's storage
// (except reshape of a non-viewable layout, which copies); backward maps the
// gradient back to the input's layout.

#include <vector>

#include "engine/tensor.h"

namespace reprise::ops {

Tensor reshape(const Tensor& x, Shape shape);  // one dim may be -1
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor contiguous(const Tensor& x);

}  // namespace reprise::ops
