// Indexing ops: checks, recording and backward rule for each.
//
// Two kernels do all the work (Backend::gather and Backend::scatter_add):
//   gather:       out[p] = x[p with p[dim] = index[p]]     (copies)
//   scatter_add:  out[p with p[dim] = index[p]] += src[p]  (adds)
// index_select and index_add are the same kernels with the 1-D index seen
// as a broadcast view (stride 0 off dim), so every op here handles strided
// inputs without copying them. Index values are validated before a kernel
// runs.
#include "ops/indexing.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/reduce.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Raises unless index is an i32/i64 tensor of the given rank on x's device.
void check_index(const char* op, const Tensor& index, int64_t rank, const Tensor& x) {
  detail::check_index_tensor(op, "index", index, x);
  REPRISE_CHECK(index.dim() == rank, op, ": expected an index of rank ", rank, " for x ",
                x.describe(), ", got ", index.describe());
}

// Raises unless every value of index lies in [0, size), naming the first bad
// one.
void check_bounds(const char* op, const Tensor& index, int64_t dim, const Tensor& x) {
  const int64_t size = x.size(dim);
  if (const auto bad = detail::first_out_of_range(index, size)) {
    REPRISE_FAIL(op, ": index ", bad->first, " is out of bounds for dim ", dim, " of size ", size,
                 " (x ", x.describe(), ", index ", index.describe(), ")");
  }
}

// Raises unless index.size(d) <= x.size(d) for every d != dim.
void check_fits(const char* op, const Tensor& index, int64_t dim, const Tensor& x) {
  for (int64_t d = 0; d < x.dim(); ++d) {
    REPRISE_CHECK(d == dim || index.size(d) <= x.size(d), op, ": index ", index.describe(),
                  " is larger than x ", x.describe(), " in dim ", d, " (only dim ", dim,
                  " may differ)");
  }
}

// The 1-D index of index_select/index_add seen with `shape`: its values run
// along dim and repeat (stride 0) along every other dim.
Tensor index_along(const Tensor& index, const Shape& shape, int64_t dim) {
  Shape strides(shape.size(), 0);
  strides[size_t(dim)] = index.stride(0);
  return index.as_strided(shape, strides, index.offset());
}

// out[p] = x[p with p[dim] = index[p]] over p in index's shape (validated).
Tensor gather_kernel(const Tensor& x, int64_t dim, const Tensor& index) {
  return backend_of(x).gather(x, dim, index);
}

// A fresh contiguous copy of x (or zeros of x's shape) with src scattered in.
Tensor scatter_add_kernel(Tensor out, int64_t dim, const Tensor& index, const Tensor& src) {
  backend_of(out).scatter_add(out, dim, index, src);
  return out;
}

// Shared checks of x and dim for the indexing ops; returns the wrapped dim.
int64_t check_x(const char* op, const Tensor& x, int64_t dim) {
  REPRISE_CHECK(x.defined(), op, ": undefined x");
  REPRISE_CHECK(x.dim() > 0, op, ": expected x with at least one dim, got ", x.describe());
  REPRISE_CHECK(dim >= -x.dim() && dim < x.dim(), op, ": dim ", dim, " is out of range for x ",
                x.describe());
  return dim < 0 ? dim + x.dim() : dim;
}

// topk and sort order numbers: no bool, and 16-bit floats only once cast.
void check_ordered(const char* op, const Tensor& x) {
  REPRISE_CHECK(x.dtype() != DType::boolean && x.dtype() != DType::bf16 && x.dtype() != DType::f16,
                op, ": expected x of dtype f32, f64, i32 or i64, got ", x.describe());
}

// Records topk or sort: values and i64 indices along dim, by `forward`.
// dx: each gradient back at its index (the indices of a line are distinct).
template <class Forward>
TopKResult record_selection(const autograd::OpInfo& op, const Tensor& x, int64_t dim,
                            Forward forward) {
  Shape in_shape = x.shape();
  Tensors out = autograd::record({
      .op = op,
      .inputs = {x},
      .forward = forward,
      .backward =
          [dim, in_shape](Node& node, const Tensors& g) {
            return Tensors{scatter_add_kernel(Tensor::zeros(in_shape, g[0].dtype(), g[0].device()),
                                              dim, node.saved_output(1), g[0])};
          },
      .save = {.outputs = {1}},
  });
  return {out[0], out[1]};
}

// Raises unless src matches x in dtype, device and rank.
void check_src(const char* op, const Tensor& x, const Tensor& src) {
  REPRISE_CHECK(src.defined(), op, ": undefined src");
  REPRISE_CHECK(src.dtype() == x.dtype() && src.dim() == x.dim() && src.device() == x.device(), op,
                ": expected src of x's dtype, rank and device, got x ", x.describe(), " and src ",
                src.describe());
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = check_x("index_select", x, dim);
  check_index("index_select", index, 1, x);
  Shape in_shape = x.shape();
  return autograd::record_one({
      .op = registry::kIndexSelect,
      .inputs = {x, index},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("index_select", in[1], dim, in[0]);
            Shape shape = in[0].shape();
            shape[size_t(dim)] = in[1].numel();
            return Tensors{gather_kernel(in[0], dim, index_along(in[1], shape, dim))};
          },
      // dx = index_add(0, dim, index, g): repeated rows sum in index order.
      .backward =
          [dim, in_shape](Node& node, const Tensors& g) {
            Tensor idx = index_along(node.saved_input(1), g[0].shape(), dim);
            return Tensors{scatter_add_kernel(Tensor::zeros(in_shape, g[0].dtype(), g[0].device()),
                                              dim, idx, g[0]),
                           Tensor()};
          },
      .save = {.inputs = {1}},
  });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = check_x("gather", x, dim);
  check_index("gather", index, x.dim(), x);
  check_fits("gather", index, dim, x);
  Shape in_shape = x.shape();
  return autograd::record_one({
      .op = registry::kGather,
      .inputs = {x, index},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("gather", in[1], dim, in[0]);
            return Tensors{gather_kernel(in[0], dim, in[1])};
          },
      // dx = scatter_add(0, dim, index, g).
      .backward =
          [dim, in_shape](Node& node, const Tensors& g) {
            return Tensors{scatter_add_kernel(Tensor::zeros(in_shape, g[0].dtype(), g[0].device()),
                                              dim, node.saved_input(1), g[0]),
                           Tensor()};
          },
      .save = {.inputs = {1}},
  });
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_x("scatter_add", x, dim);
  check_index("scatter_add", index, x.dim(), x);
  check_src("scatter_add", x, src);
  REPRISE_CHECK(index.shape() == src.shape(), "scatter_add: expected index and src of one shape, ",
                "got index ", index.describe(), " and src ", src.describe());
  check_fits("scatter_add", index, dim, x);
  autograd::SaveSpec save;
  if (src.requires_grad()) save.inputs = {1};  // only dsrc reads the index
  return autograd::record_one({
      .op = registry::kScatterAdd,
      .inputs = {x, index, src},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("scatter_add", in[1], dim, in[0]);
            return Tensors{scatter_add_kernel(in[0].clone(), dim, in[1], in[2])};
          },
      // dx = g; dsrc = gather(g, dim, index).
      .backward =
          [dim](Node& node, const Tensors& g) {
            Tensor gsrc =
                node.needs_input_grad(2) ? gather_kernel(g[0], dim, node.saved_input(1)) : Tensor();
            return Tensors{g[0], Tensor(), gsrc};
          },
      .save = save,
  });
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_x("index_add", x, dim);
  check_index("index_add", index, 1, x);
  check_src("index_add", x, src);
  Shape expected = x.shape();
  expected[size_t(dim)] = index.numel();
  REPRISE_CHECK(src.shape() == expected, "index_add: expected src of shape ", to_string(expected),
                " for x ", x.describe(), " and index ", index.describe(), ", got src ",
                src.describe());
  autograd::SaveSpec save;
  if (src.requires_grad()) save.inputs = {1};  // only dsrc reads the index
  return autograd::record_one({
      .op = registry::kIndexAdd,
      .inputs = {x, index, src},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("index_add", in[1], dim, in[0]);
            return Tensors{scatter_add_kernel(in[0].clone(), dim,
                                              index_along(in[1], in[2].shape(), dim), in[2])};
          },
      // dx = g; dsrc = index_select(g, dim, index).
      .backward =
          [dim](Node& node, const Tensors& g) {
            Tensor gsrc;
            if (node.needs_input_grad(2)) {
              Shape shape = node.inputs[2].shape;
              gsrc = gather_kernel(g[0], dim, index_along(node.saved_input(1), shape, dim));
            }
            return Tensors{g[0], Tensor(), gsrc};
          },
      .save = save,
  });
}

namespace {

// out = cond ? a : b, broadcast (the forward of where; its backward uses it
// with a zero scalar to mask gradients).
Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape shape =
      broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  NoGradGuard no_grad;  // expand is plumbing here
  return backend_of(a).where(cond.expand(shape), a.expand(shape), b.expand(shape));
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(cond.defined(), "where: undefined cond");
  REPRISE_CHECK(cond.dtype() == DType::boolean && cond.device() == a.device(),
                "where: expected cond of dtype bool on a's device, got ", cond.describe(), " (a ",
                a.describe(), ")");
  detail::check_same_dtype_device("where", a, b);
  try {
    broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  } catch (const Error&) {
    REPRISE_FAIL("where: cond ", cond.describe(), ", a ", a.describe(), " and b ", b.describe(),
                 " cannot be broadcast together");
  }
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record_one({
      .op = registry::kWhere,
      .inputs = {cond, a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{where_kernel(in[0], in[1], in[2])}; },
      // da = g where cond, db = g where !cond, each summed to its own shape.
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensor cond = node.saved_input(0);
            Tensor zero = Tensor::zeros({}, g[0].dtype(), g[0].device());
            Tensors grads(3);
            if (node.needs_input_grad(1))
              grads[1] = detail::sum_to_shape(where_kernel(cond, g[0], zero), sa);
            if (node.needs_input_grad(2))
              grads[2] = detail::sum_to_shape(where_kernel(cond, zero, g[0]), sb);
            return grads;
          },
      .save = {.inputs = {0}},
  });
}

Tensor where(const Tensor& cond, const Tensor& a, double b) {
  REPRISE_CHECK(a.defined(), "where: undefined a");
  return where(cond, a, Tensor::full({}, b, a.dtype(), a.device()));
}

Tensor where(const Tensor& cond, double a, const Tensor& b) {
  REPRISE_CHECK(b.defined(), "where: undefined b");
  return where(cond, Tensor::full({}, a, b.dtype(), b.device()), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  REPRISE_CHECK(x.defined() && mask.defined(), "masked_fill: undefined x or mask");
  REPRISE_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(),
                "masked_fill: mask ", mask.describe(), " does not broadcast to x ", x.describe());
  return where(mask, value, x);
}

TopKResult topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  dim = check_x("topk", x, dim);
  REPRISE_CHECK(k >= 0 && k <= x.size(dim), "topk: k = ", k, " is outside [0, ", x.size(dim),
                "] for dim ", dim, " of ", x.describe());
  check_ordered("topk", x);
  return record_selection(registry::kTopk, x, dim,
                          [dim, k, largest, sorted](const Tensors& in, auto*) {
                            return backend_of(in[0]).topk(in[0], k, dim, largest, sorted);
                          });
}

TopKResult sort(const Tensor& x, int64_t dim, bool descending) {
  dim = check_x("sort", x, dim);
  check_ordered("sort", x);
  return record_selection(registry::kSort, x, dim, [dim, descending](const Tensors& in, auto*) {
    return backend_of(in[0]).sort(in[0], dim, descending);
  });
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return sort(x, dim, descending).indices;
}

}  // namespace reprise::ops
