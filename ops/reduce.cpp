#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "engine/lines_along.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/check.h"
#include "ops/compare.h"
#include "ops/indexing.h"
#include "ops/registry.h"
#include "ops/unary.h"
#include "ops/views.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Sorted, unique, wrapped dims; all dims when `dims` is empty.
std::vector<int64_t> normalize_dims(std::vector<int64_t> dims, int64_t ndim, const char* op) {
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t& d : dims) d = wrap_dim(d, ndim, op);
  std::sort(dims.begin(), dims.end());
  REPRISE_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), op,
                ": repeated dim in ", to_string(Shape(dims)));
  return dims;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced)
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Expands a reduced gradient back over the reduced dims.  g: reduced -> shape.
Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims,
                      bool keepdim) {
  Tensor k = g;
  if (!keepdim) {
    for (int64_t d : dims) k = k.unsqueeze(d);
  }
  return k.expand(shape).contiguous();
}

}  // namespace

namespace detail {

Tensor sum_kernel(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_float("sum", x);
  std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "sum");
  Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  // Bring the reduced dims together (a copy only when they are not already
  // one block), then reduce the middle of [A, R, B].
  Tensor src = x;
  bool block = dims.empty() || dims.back() - dims.front() + 1 == int64_t(dims.size());
  if (!block) {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (!std::binary_search(dims.begin(), dims.end(), d)) perm.push_back(d);
    }
    int64_t first = int64_t(perm.size());
    perm.insert(perm.end(), dims.begin(), dims.end());
    src = x.permute(perm);
    dims.clear();
    for (int64_t d = first; d < x.dim(); ++d) dims.push_back(d);
  }
  src = src.contiguous();
  int64_t A = 1, R = 1, B = 1;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (!dims.empty() && d < dims.front())
      A *= src.size(d);
    else if (!dims.empty() && d <= dims.back())
      R *= src.size(d);
    else
      B *= src.size(d);
  }
  if (dims.empty()) B = src.numel();  // a 0-dim tensor: nothing reduced
  return backend_of(src).sum_middle(src, A, R, B).view(out_shape);
}

Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  std::vector<int64_t> dims;
  int64_t lead = g.dim() - int64_t(shape.size());
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  }
  Tensor s = sum_kernel(g, dims, true);
  // Drop the leading dims that broadcasting added.
  return s.view(shape);
}

}  // namespace detail

Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  dims = normalize_dims(std::move(dims), x.dim(), "sum");
  Shape in_shape = x.shape();
  return autograd::record_one({
      .op = registry::kSum,
      .inputs = {x},
      .forward = [dims, keepdim](
                     const Tensors& in,
                     auto*) { return Tensors{detail::sum_kernel(in[0], dims, keepdim)}; },
      .backward =
          [dims, keepdim, in_shape](Node&, const Tensors& g) {
            return Tensors{expand_reduced(g[0], in_shape, dims, keepdim)};
          },
  });
}

Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  dims = normalize_dims(std::move(dims), x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : dims) count *= x.size(d);
  REPRISE_CHECK(count > 0, "mean: reducing ", x.describe(), " over an empty dim");
  Shape in_shape = x.shape();
  double scale = 1.0 / double(count);
  return autograd::record_one({
      .op = registry::kMean,
      .inputs = {x},
      .forward =
          [dims, keepdim, scale](const Tensors& in, auto*) {
            const Tensor s = detail::sum_kernel(in[0], dims, keepdim);
            return Tensors{backend_of(s).unary(UnaryOp::mul_scalar, scale, s)};
          },
      .backward =
          [dims, keepdim, in_shape, scale](Node&, const Tensors& g) {
            const Tensor gs = backend_of(g[0]).unary(UnaryOp::mul_scalar, scale, g[0]);
            return Tensors{expand_reduced(gs, in_shape, dims, keepdim)};
          },
  });
}

MaxResult max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_float("max", x);
  dim = wrap_dim(dim, x.dim(), "max");
  REPRISE_CHECK(x.dim() == 0 || x.size(dim) > 0, "max: dim ", dim, " of ", x.describe(),
                " is empty");
  const Shape in_shape = x.shape();
  auto forward = [dim, keepdim](const Tensors& in, auto*) {
    const Tensor& src = in[0];
    // Move dim last, keeping the other dims in order: [..., R].
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < src.dim(); ++d) {
      if (d != dim) perm.push_back(d);
    }
    perm.push_back(dim);
    const Tensor moved = src.dim() == 0 ? src.unsqueeze(0) : src.permute(perm).contiguous();
    Shape kept = moved.shape();
    kept.pop_back();
    Tensors out = backend_of(moved).max_rows(moved);
    Tensor values = out[0].view(kept), indices = out[1].view(kept);
    if (keepdim && src.dim() > 0) {
      values = values.unsqueeze(dim);
      indices = indices.unsqueeze(dim);
    }
    return Tensors{values, indices};
  };
  Tensors out = autograd::record({
      .op = registry::kMax,
      .inputs = {x},
      .forward = forward,
      // dx: each gradient scattered to its argmax along dim.
      .backward =
          [dim, keepdim, in_shape](Node& node, const Tensors& g) {
            const int64_t d = in_shape.empty() ? 0 : dim;
            const Shape shape = in_shape.empty() ? Shape{1} : in_shape;
            // g and the indices with the reduced dim present (size 1).
            auto with_dim = [&](const Tensor& t) {
              if (in_shape.empty()) return t.reshape({1});
              return keepdim ? t : t.unsqueeze(dim);
            };
            const Tensor gk = with_dim(g[0]), ik = with_dim(node.saved_output(1));
            Tensor dx = Tensor::zeros(shape, g[0].dtype(), g[0].device());
            backend_of(dx).scatter_add(dx, d, ik, gk);
            return Tensors{dx.view(in_shape)};
          },
      .save = {.outputs = {1}},
  });
  return {out[0], out[1]};
}

namespace {

// The running sum along dim of x seen as (A, R, B), from the end when
// reverse (a kernel call, not recorded).
Tensor cumsum_kernel(const Tensor& x, int64_t dim, bool reverse) {
  const LinesAlong l = lines_along(x.shape(), dim);
  return backend_of(x).cumsum_middle(x, l.outer, l.n, l.inner, reverse).view(x.shape());
}

}  // namespace

Tensor cumsum(const Tensor& x_in, int64_t dim) {
  REPRISE_CHECK(x_in.defined(), "cumsum: undefined x");
  REPRISE_CHECK(x_in.dtype() == DType::f32 || x_in.dtype() == DType::f64 ||
                    x_in.dtype() == DType::i32 || x_in.dtype() == DType::i64,
                "cumsum: expected x of dtype f32, f64, i32 or i64, got ", x_in.describe(),
                " (cast bool and 16-bit tensors first)");
  const Tensor x = x_in.dtype() == DType::i32 ? cast(x_in, DType::i64) : x_in;
  dim = x.dim() == 0 ? wrap_dim(dim, 1, "cumsum") : wrap_dim(dim, x.dim(), "cumsum");
  return autograd::record_one({
      .op = registry::kCumsum,
      .inputs = {x},
      .forward = [dim](const Tensors& in,
                       auto*) { return Tensors{cumsum_kernel(in[0], dim, false)}; },
      .backward = [dim](Node&,
                        const Tensors& g) { return Tensors{cumsum_kernel(g[0], dim, true)}; },
  });
}

// ---- composed ----------------------------------------------------------------

namespace {

// max (or, for smallest, min through negation) over each of dims, from the
// last: (values with the reduced dims at size 1).
Tensor extreme_over(const Tensor& x, const std::vector<int64_t>& dims, bool smallest) {
  Tensor t = smallest ? neg(x) : x;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) t = max(t, *d, /*keepdim=*/true).values;
  return smallest ? neg(t) : t;
}

// t with the size-1 dims `dims` (sorted) removed, unless keepdim.
Tensor drop_dims(Tensor t, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return t;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) t = squeeze(t, *d);
  return t;
}

Tensor extreme(const Tensor& x, std::vector<int64_t> dims, bool keepdim, bool smallest) {
  const char* name = smallest ? "amin" : "amax";
  detail::check_float(name, x);
  dims = normalize_dims(std::move(dims), x.dim(), name);
  for (int64_t d : dims)
    REPRISE_CHECK(x.size(d) > 0, name, ": dim ", d, " of ", x.describe(), " is empty");
  return drop_dims(extreme_over(x, dims, smallest), dims, keepdim);
}

Tensor arg_extreme(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool smallest) {
  const char* name = smallest ? "argmin" : "argmax";
  detail::check_float(name, x);
  REPRISE_CHECK(x.numel() > 0, name, ": ", x.describe(), " is empty");
  const Tensor t = smallest ? neg(x) : x;
  if (dim) return max(t, *dim, keepdim).indices;
  Tensor flat = max(reshape(t, {-1}), 0).indices;  // ()
  return keepdim ? reshape(flat, Shape(size_t(x.dim()), 1)) : flat;
}

}  // namespace

Tensor amax(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return extreme(x, std::move(dims), keepdim, false);
}

Tensor amin(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return extreme(x, std::move(dims), keepdim, true);
}

MaxResult min(const Tensor& x, int64_t dim, bool keepdim) {
  MaxResult m = max(neg(x), dim, keepdim);
  return {neg(m.values), m.indices};
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, false);
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, true);
}

Tensor logsumexp(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  detail::check_float("logsumexp", x);
  dims = normalize_dims(std::move(dims), x.dim(), "logsumexp");
  Tensor m;  // (x's shape, reduced dims at 1): the shift, a constant to autograd
  {
    NoGradGuard constant;
    m = extreme_over(x.detach(), dims, false);
    m = where(eq(abs(m), std::numeric_limits<double>::infinity()), 0.0, m);
  }
  const Tensor shifted_sum = sum(exp(sub(x, m)), dims, /*keepdim=*/true);
  return drop_dims(add(log(shifted_sum), m), dims, keepdim);
}

Tensor var(const Tensor& x, std::vector<int64_t> dims, double correction, bool keepdim) {
  detail::check_float("var", x);
  dims = normalize_dims(std::move(dims), x.dim(), "var");
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  REPRISE_CHECK(n > 0, "var: reducing ", x.describe(), " over an empty dim");
  const Tensor centred = sub(x, mean(x, dims, /*keepdim=*/true));
  // n - correction <= 0 divides by zero or less: inf or NaN, as torch.
  return mul(sum(square(centred), dims, keepdim), 1.0 / (double(n) - correction));
}

Tensor std(const Tensor& x, std::vector<int64_t> dims, double correction, bool keepdim) {
  return sqrt(var(x, std::move(dims), correction, keepdim));
}

}  // namespace reprise::ops
