#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/tape.h"
#include "engine/threads.h"
#include "ops/elementwise.h"

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

// Sum of n contiguous values with 16 independent partial sums (vectorises
// without reassociation flags; the combination order is fixed).
template <class T>
T sum_contiguous(const T* p, int64_t n) {
  constexpr int kLanes = 16;
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += p[i + l];
  }
  T total = 0;
  for (int l = 0; l < kLanes; ++l) total += acc[l];
  for (; i < n; ++i) total += p[i];
  return total;
}

// x viewed as [A, R, B] (contiguous): out[a, b] = sum_r x[a, r, b].
template <class T>
void sum_middle(const T* x, T* out, int64_t A, int64_t R, int64_t B) {
  if (B == 1) {
    threads::parallel_for(A, std::max<int64_t>(1, 4096 / std::max<int64_t>(R, 1)),
                          [&](int64_t a0, int64_t a1) {
                            for (int64_t a = a0; a < a1; ++a) out[a] = sum_contiguous(x + a * R, R);
                          });
    return;
  }
  // Parallel over (a, b-block); each out element accumulates r in order.
  constexpr int64_t kBlock = 256;
  int64_t blocks = (B + kBlock - 1) / kBlock;
  threads::parallel_for(A * blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(R * kBlock, 1)),
                        [&](int64_t t0, int64_t t1) {
                          for (int64_t t = t0; t < t1; ++t) {
                            int64_t a = t / blocks, b0 = (t % blocks) * kBlock;
                            int64_t b1 = std::min(B, b0 + kBlock);
                            T* o = out + a * B;
                            for (int64_t b = b0; b < b1; ++b) o[b] = 0;
                            for (int64_t r = 0; r < R; ++r) {
                              const T* row = x + (a * R + r) * B;
                              for (int64_t b = b0; b < b1; ++b) o[b] += row[b];
                            }
                          }
                        });
}

const autograd::OpInfo kSum{"sum"};
const autograd::OpInfo kMean{"mean"};
const autograd::OpInfo kMax{"max"};

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
  check_float_cpu("sum", x);
  std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "sum");
  Shape out_shape = reduced_shape(x.shape(), dims, keepdim);
  Tensor out = Tensor::empty(out_shape, x.dtype());
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
  dispatch_float(x.dtype(), "sum",
                 [&]<class T>() { sum_middle(src.data<T>(), out.data<T>(), A, R, B); });
  return out;
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
      .op = kSum,
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
      .op = kMean,
      .inputs = {x},
      .forward =
          [dims, keepdim, scale](const Tensors& in, auto*) {
            Tensor s = detail::sum_kernel(in[0], dims, keepdim);
            return Tensors{
                detail::map("mean", s, [scale](auto v) { return v * decltype(v)(scale); })};
          },
      .backward =
          [dims, keepdim, in_shape, scale](Node&, const Tensors& g) {
            Tensor gs =
                detail::map("mean", g[0], [scale](auto v) { return v * decltype(v)(scale); });
            return Tensors{expand_reduced(gs, in_shape, dims, keepdim)};
          },
  });
}

MaxResult max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_float_cpu("max", x);
  dim = wrap_dim(dim, x.dim(), "max");
  REPRISE_CHECK(x.dim() == 0 || x.size(dim) > 0, "max: dim ", dim, " of ", x.describe(),
                " is empty");
  Shape in_shape = x.shape();
  auto forward = [dim, keepdim](const Tensors& in, auto*) {
    const Tensor& src = in[0];
    // Move dim last, keeping the other dims in order: [..., R].
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < src.dim(); ++d) {
      if (d != dim) perm.push_back(d);
    }
    perm.push_back(dim);
    Tensor moved = src.dim() == 0 ? src.unsqueeze(0) : src.permute(perm).contiguous();
    int64_t R = moved.size(-1), M = moved.numel() / R;
    Shape kept = moved.shape();
    kept.pop_back();
    Tensor values = Tensor::empty(kept, src.dtype());
    Tensor indices = Tensor::empty(kept, DType::i64);
    dispatch_float(src.dtype(), "max", [&]<class T>() {
      const T* p = moved.data<T>();
      T* v = values.data<T>();
      int64_t* idx = indices.data<int64_t>();
      threads::parallel_for(M, 64, [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          const T* row = p + m * R;
          int64_t best = 0;
          for (int64_t r = 1; r < R && !std::isnan(row[best]); ++r) {
            if (row[r] > row[best] || std::isnan(row[r])) best = r;
          }
          v[m] = row[best];
          idx[m] = best;
        }
      });
    });
    if (keepdim && src.dim() > 0) {
      values = values.unsqueeze(dim);
      indices = indices.unsqueeze(dim);
    }
    return Tensors{values, indices};
  };
  Tensors out = autograd::record({
      .op = kMax,
      .inputs = {x},
      .forward = forward,
      .backward =
          [dim, keepdim, in_shape](Node& node, const Tensors& g) {
            Tensor idx = node.saved_output(1);
            Tensor dx = Tensor::zeros(in_shape, g[0].dtype());
            Tensor gk = keepdim || in_shape.empty() ? g[0] : g[0].unsqueeze(dim);
            Tensor ik = keepdim || in_shape.empty() ? idx : idx.unsqueeze(dim);
            gk = gk.contiguous();
            ik = ik.contiguous();
            // Scatter each gradient to its argmax along dim.
            int64_t d = in_shape.empty() ? 0 : dim;
            Shape shape = in_shape.empty() ? Shape{1} : in_shape;
            int64_t outer = 1, inner = 1;
            for (int64_t i = 0; i < d; ++i) outer *= shape[i];
            for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
            int64_t R = shape[d];
            dispatch_float(dx.dtype(), "max", [&]<class T>() {
              T* pdx = dx.data<T>();
              const T* pg = gk.data<T>();
              const int64_t* pi = ik.data<int64_t>();
              for (int64_t o = 0; o < outer; ++o) {
                for (int64_t i = 0; i < inner; ++i) {
                  int64_t k = o * inner + i;
                  pdx[(o * R + pi[k]) * inner + i] += pg[k];
                }
              }
            });
            return Tensors{dx};
          },
      .save = {.outputs = {1}},
  });
  return {out[0], out[1]};
}

}  // namespace reprise::ops
