// Indexing ops: forward kernel, backward rule and OpInfo for each.
//
// Two kernels do all the work:
//   gather_kernel:      out[p] = x[p with p[dim] = index[p]]     (copies)
//   scatter_add_into:   out[p with p[dim] = index[p]] += src[p]  (adds)
// index_select and index_add are the same kernels with the 1-D index seen
// as a broadcast view (stride 0 off dim), so every op here handles strided
// inputs without copying them. Index values are validated before a kernel
// runs (no throwing inside a parallel region).
#include "ops/indexing.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "autograd/tape.h"
#include "engine/strided_loop.h"
#include "engine/threads.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Copying and selecting ops do no arithmetic.
double no_flops(const Tensors&, const Tensors&) { return 0; }
// index_select and gather read only the selected elements of x (one per
// output element), not all of it: index + selected + output.
double selected_bytes(const Tensors& in, const Tensors& out) {
  return double(in[1].nbytes() + 2 * out[0].nbytes());
}
// One add per source element (input 2 is src).
double source_adds(const Tensors& in, const Tensors&) { return double(in[2].numel()); }
// Roughly one comparison per input element (selection, then a sort of k).
double input_compares(const Tensors& in, const Tensors&) { return double(in[0].numel()); }

const autograd::OpInfo kIndexSelect{"index_select", false, no_flops, selected_bytes};
const autograd::OpInfo kGather{"gather", false, no_flops, selected_bytes};
const autograd::OpInfo kScatterAdd{"scatter_add", false, source_adds};
const autograd::OpInfo kIndexAdd{"index_add", false, source_adds};
const autograd::OpInfo kWhere{"where", false, no_flops};
const autograd::OpInfo kTopk{"topk", false, input_compares};

void check_cpu(const char* op, const Tensor& t, const char* what) {
  REPRISE_CHECK(t.defined(), op, ": undefined ", what);
  REPRISE_CHECK(t.device().is_cpu(), op, ": ", what, " ", t.describe(),
                ": no kernel for this device");
}

// Raises unless index is an i32/i64 cpu tensor of the given rank.
void check_index(const char* op, const Tensor& index, int64_t rank, const Tensor& x) {
  check_cpu(op, index, "index");
  REPRISE_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64, op,
                ": expected an index of dtype i32 or i64, got ", index.describe());
  REPRISE_CHECK(index.dim() == rank, op, ": expected an index of rank ", rank, " for x ",
                x.describe(), ", got ", index.describe());
}

// Raises unless every value of index lies in [0, size), naming the first bad
// one. The scan runs in parallel and only flags; the message comes from a
// serial pass.
void check_bounds(const char* op, const Tensor& index, int64_t dim, const Tensor& x) {
  const int64_t size = x.size(dim);
  dispatch_index(index.dtype(), op, [&]<class I>() {
    const I* p = index.data<I>();
    std::atomic<bool> bad{false};
    for_each_run<1>(index.shape(), {index.strides()}, [&](auto off, int64_t n, auto st) {
      bool any = false;
      for (int64_t j = 0; j < n; ++j) {
        int64_t v = int64_t(p[off[0] + j * st[0]]);
        any = any || v < 0 || v >= size;
      }
      if (any) bad.store(true, std::memory_order_relaxed);
    });
    if (!bad.load()) return;
    for (int64_t v : index.to_vector<int64_t>()) {
      REPRISE_CHECK(v >= 0 && v < size, op, ": index ", v, " is out of bounds for dim ", dim,
                    " of size ", size, " (x ", x.describe(), ", index ", index.describe(), ")");
    }
  });
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
Tensor gather_kernel(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  // x's strides over the output positions, with dim contributed by the index.
  Shape xs = x.strides();
  const int64_t xd = xs[size_t(dim)];
  xs[size_t(dim)] = 0;
  dispatch_all(x.dtype(), op, [&]<class T>() {
    dispatch_index(index.dtype(), op, [&]<class I>() {
      T* po = out.data<T>();
      const T* px = x.data<T>();
      const I* pi = index.data<I>();
      for_each_run<3>(index.shape(), {out.strides(), xs, index.strides()},
                      [&](auto off, int64_t n, auto st) {
                        T* o = po + off[0];
                        const T* xb = px + off[1];
                        const I* ib = pi + off[2];
                        if (st[2] == 0) {  // one index for the whole run: a row copy
                          const T* row = xb + int64_t(*ib) * xd;
                          if (st[0] == 1 && st[1] == 1) {
                            std::copy(row, row + n, o);
                          } else {
                            for (int64_t j = 0; j < n; ++j) o[j * st[0]] = row[j * st[1]];
                          }
                        } else {
                          for (int64_t j = 0; j < n; ++j)
                            o[j * st[0]] = xb[j * st[1] + int64_t(ib[j * st[2]]) * xd];
                        }
                      });
    });
  });
  return out;
}

// out[p with p[dim] = index[p]] += src[p] over p in src's shape; out is a
// fresh contiguous tensor, index has src's shape (validated).
//
// A "line" is the set of p that share every coordinate but dim; a line only
// ever writes into its own line of out. Tasks own whole lines (blocks of the
// innermost coalesced run of lines) and add a line's contributions in
// increasing p[dim], so every sum has one fixed order.
void scatter_add_into(const char* op, const Tensor& out, int64_t dim, const Tensor& index,
                      const Tensor& src) {
  const Shape& shape = src.shape();
  if (numel(shape) == 0) return;
  const int64_t count = shape[size_t(dim)];
  const int64_t od = out.stride(dim), sd = src.stride(dim), id = index.stride(dim);
  Shape lines = shape;
  lines[size_t(dim)] = 1;
  StridedLayout<3> l = coalesce<3>(lines, {out.strides(), src.strides(), index.strides()});
  const int64_t nd = int64_t(l.shape.size());
  const int64_t inner = l.shape[size_t(nd - 1)];
  const int64_t runs = numel(l.shape) / inner;
  const int64_t so = l.strides[0][size_t(nd - 1)], ss = l.strides[1][size_t(nd - 1)],
                si = l.strides[2][size_t(nd - 1)];
  // Blocks split a run so that a single run of lines (dim 0 of a matrix)
  // still spreads over threads; they change which thread owns a line, not
  // the order of its sums.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / (count * kBlock + 1));
  dispatch_arith(out.dtype(), op, [&]<class T>() {
    dispatch_index(index.dtype(), op, [&]<class I>() {
      T* po = out.data<T>();
      const T* ps = src.data<T>();
      const I* pi = index.data<I>();
      threads::parallel_for(runs * blocks, grain, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t e0 = (t % blocks) * kBlock, e1 = std::min(inner, e0 + kBlock);
          std::array<int64_t, 3> base{};
          for (int64_t d = nd - 2, rest = t / blocks; d >= 0; --d) {
            const int64_t i = rest % l.shape[size_t(d)];
            rest /= l.shape[size_t(d)];
            for (size_t k = 0; k < 3; ++k) base[k] += i * l.strides[k][size_t(d)];
          }
          T* o = po + base[0];
          const T* s = ps + base[1];
          const I* ix = pi + base[2];
          if (std::abs(ss) <= std::abs(sd)) {
            // Lines lie along the run: walk dim outside so reads stay in rows.
            for (int64_t j = 0; j < count; ++j) {
              const T* srow = s + j * sd;
              const I* irow = ix + j * id;
              if (si == 0) {  // one index for the whole row (index_add)
                T* orow = o + int64_t(*irow) * od;
                if (so == 1 && ss == 1) {
                  for (int64_t e = e0; e < e1; ++e) orow[e] += srow[e];
                } else {
                  for (int64_t e = e0; e < e1; ++e) orow[e * so] += srow[e * ss];
                }
              } else {
                for (int64_t e = e0; e < e1; ++e)
                  o[e * so + int64_t(irow[e * si]) * od] += srow[e * ss];
              }
            }
          } else {
            // Dim is the closer one in memory: finish each line in turn.
            for (int64_t e = e0; e < e1; ++e) {
              T* oe = o + e * so;
              const T* se = s + e * ss;
              const I* ie = ix + e * si;
              for (int64_t j = 0; j < count; ++j) oe[int64_t(ie[j * id]) * od] += se[j * sd];
            }
          }
        }
      });
    });
  });
}

// A fresh contiguous copy of x (or zeros of x's shape) with src scattered in.
Tensor scatter_add_kernel(const char* op, Tensor out, int64_t dim, const Tensor& index,
                          const Tensor& src) {
  scatter_add_into(op, out, dim, index, src);
  return out;
}

// Shared checks of x and dim for the indexing ops; returns the wrapped dim.
int64_t check_x(const char* op, const Tensor& x, int64_t dim) {
  check_cpu(op, x, "x");
  REPRISE_CHECK(x.dim() > 0, op, ": expected x with at least one dim, got ", x.describe());
  REPRISE_CHECK(dim >= -x.dim() && dim < x.dim(), op, ": dim ", dim, " is out of range for x ",
                x.describe());
  return dim < 0 ? dim + x.dim() : dim;
}

// Raises unless src matches x in dtype, device and rank.
void check_src(const char* op, const Tensor& x, const Tensor& src) {
  check_cpu(op, src, "src");
  REPRISE_CHECK(src.dtype() == x.dtype() && src.dim() == x.dim(), op,
                ": expected src of x's dtype and rank, got x ", x.describe(), " and src ",
                src.describe());
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <class T>
struct Entry {
  T value;
  int64_t index;
};

// topk's total order: by value (NaN above every number), then lower index.
template <bool Largest, class T>
bool ranks_before(const Entry<T>& a, const Entry<T>& b) {
  const bool an = is_nan(a.value), bn = is_nan(b.value);
  if (an != bn) return Largest ? an : bn;
  if (!an && a.value != b.value) return Largest ? a.value > b.value : a.value < b.value;
  return a.index < b.index;
}

// The k first entries of each row under ranks_before, x contiguous as
// (outer, R, inner) rows along the middle dim. The order is total, so both
// selections below pick the same k entries.
template <bool Largest, class T>
void topk_rows(const T* x, T* values, int64_t* indices, int64_t outer, int64_t R, int64_t inner,
               int64_t k, bool sorted) {
  auto before = [](const Entry<T>& a, const Entry<T>& b) { return ranks_before<Largest>(a, b); };
  threads::parallel_for(outer * inner, std::max<int64_t>(1, 4096 / R), [&](int64_t m0, int64_t m1) {
    std::vector<Entry<T>> best;
    for (int64_t m = m0; m < m1; ++m) {
      const int64_t o = m / inner, i = m % inner;
      const T* in = x + o * R * inner + i;
      best.clear();
      if (k * 16 <= R) {
        // Small k (a router's top-2, a sampler's top-50): one pass keeping
        // the best k in a heap whose front is the worst of them.
        for (int64_t r = 0; r < k; ++r) best.push_back({in[r * inner], r});
        std::make_heap(best.begin(), best.end(), before);
        for (int64_t r = k; r < R; ++r) {
          const Entry<T> e{in[r * inner], r};
          if (!before(e, best.front())) continue;
          std::pop_heap(best.begin(), best.end(), before);
          best.back() = e;
          std::push_heap(best.begin(), best.end(), before);
        }
      } else {
        for (int64_t r = 0; r < R; ++r) best.push_back({in[r * inner], r});
        std::nth_element(best.begin(), best.begin() + k, best.end(), before);
        best.resize(size_t(k));
      }
      if (sorted) {
        std::sort(best.begin(), best.end(), before);
      } else {
        std::sort(best.begin(), best.end(),
                  [](const Entry<T>& a, const Entry<T>& b) { return a.index < b.index; });
      }
      T* v = values + o * k * inner + i;
      int64_t* ix = indices + o * k * inner + i;
      for (int64_t t = 0; t < k; ++t) {
        v[t * inner] = best[size_t(t)].value;
        ix[t * inner] = best[size_t(t)].index;
      }
    }
  });
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = check_x("index_select", x, dim);
  check_index("index_select", index, 1, x);
  Shape in_shape = x.shape();
  return autograd::record_one({
      .op = kIndexSelect,
      .inputs = {x, index},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("index_select", in[1], dim, in[0]);
            Shape shape = in[0].shape();
            shape[size_t(dim)] = in[1].numel();
            return Tensors{
                gather_kernel("index_select", in[0], dim, index_along(in[1], shape, dim))};
          },
      // dx = index_add(0, dim, index, g): repeated rows sum in index order.
      .backward =
          [dim, in_shape](Node& node, const Tensors& g) {
            Tensor idx = index_along(node.saved_input(1), g[0].shape(), dim);
            return Tensors{scatter_add_kernel("index_select", Tensor::zeros(in_shape, g[0].dtype()),
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
      .op = kGather,
      .inputs = {x, index},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("gather", in[1], dim, in[0]);
            return Tensors{gather_kernel("gather", in[0], dim, in[1])};
          },
      // dx = scatter_add(0, dim, index, g).
      .backward =
          [dim, in_shape](Node& node, const Tensors& g) {
            return Tensors{scatter_add_kernel("gather", Tensor::zeros(in_shape, g[0].dtype()), dim,
                                              node.saved_input(1), g[0]),
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
      .op = kScatterAdd,
      .inputs = {x, index, src},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("scatter_add", in[1], dim, in[0]);
            return Tensors{scatter_add_kernel("scatter_add", in[0].clone(), dim, in[1], in[2])};
          },
      // dx = g; dsrc = gather(g, dim, index).
      .backward =
          [dim](Node& node, const Tensors& g) {
            Tensor gsrc = node.needs_input_grad(2)
                              ? gather_kernel("scatter_add", g[0], dim, node.saved_input(1))
                              : Tensor();
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
      .op = kIndexAdd,
      .inputs = {x, index, src},
      .forward =
          [dim](const Tensors& in, auto*) {
            check_bounds("index_add", in[1], dim, in[0]);
            return Tensors{scatter_add_kernel("index_add", in[0].clone(), dim,
                                              index_along(in[1], in[2].shape(), dim), in[2])};
          },
      // dx = g; dsrc = index_select(g, dim, index).
      .backward =
          [dim](Node& node, const Tensors& g) {
            Tensor gsrc;
            if (node.needs_input_grad(2)) {
              Shape shape = node.inputs[2].shape;
              gsrc = gather_kernel("index_add", g[0], dim,
                                   index_along(node.saved_input(1), shape, dim));
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
  Shape shape =
      broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor out = Tensor::empty(shape, a.dtype());
  Tensor c = cond.expand(shape), ea = a.expand(shape), eb = b.expand(shape);
  dispatch_all(a.dtype(), "where", [&]<class T>() {
    T* po = out.data<T>();
    const bool* pc = c.data<bool>();
    const T* pa = ea.data<T>();
    const T* pb = eb.data<T>();
    for_each_run<4>(shape, {out.strides(), c.strides(), ea.strides(), eb.strides()},
                    [&](auto off, int64_t n, auto st) {
                      T* o = po + off[0];
                      const bool* cc = pc + off[1];
                      const T* x = pa + off[2];
                      const T* y = pb + off[3];
                      if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
                        for (int64_t j = 0; j < n; ++j) o[j] = cc[j] ? x[j] : y[j];
                      } else {
                        for (int64_t j = 0; j < n; ++j)
                          o[j * st[0]] = cc[j * st[1]] ? x[j * st[2]] : y[j * st[3]];
                      }
                    });
  });
  return out;
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_cpu("where", cond, "cond");
  REPRISE_CHECK(cond.dtype() == DType::boolean, "where: expected cond of dtype bool, got ",
                cond.describe());
  detail::check_same_dtype_device("where", a, b);
  try {
    broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  } catch (const Error&) {
    REPRISE_FAIL("where: cond ", cond.describe(), ", a ", a.describe(), " and b ", b.describe(),
                 " cannot be broadcast together");
  }
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record_one({
      .op = kWhere,
      .inputs = {cond, a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{where_kernel(in[0], in[1], in[2])}; },
      // da = g where cond, db = g where !cond, each summed to its own shape.
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensor cond = node.saved_input(0);
            Tensor zero = Tensor::zeros({}, g[0].dtype());
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

TopKResult topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  dim = check_x("topk", x, dim);
  REPRISE_CHECK(k >= 0 && k <= x.size(dim), "topk: k = ", k, " is outside [0, ", x.size(dim),
                "] for dim ", dim, " of ", x.describe());
  REPRISE_CHECK(x.dtype() != DType::boolean && x.dtype() != DType::bf16 && x.dtype() != DType::f16,
                "topk: expected x of dtype f32, f64, i32 or i64, got ", x.describe());
  Shape in_shape = x.shape();
  auto forward = [dim, k, largest, sorted](const Tensors& in, auto*) {
    const Tensor src = in[0].contiguous();
    Shape shape = src.shape();
    shape[size_t(dim)] = k;
    Tensor values = Tensor::empty(shape, src.dtype());
    Tensor indices = Tensor::empty(shape, DType::i64);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= src.size(d);
    for (int64_t d = dim + 1; d < src.dim(); ++d) inner *= src.size(d);
    if (k > 0) {
      dispatch_arith(src.dtype(), "topk", [&]<class T>() {
        auto run = largest ? topk_rows<true, T> : topk_rows<false, T>;
        run(src.data<T>(), values.data<T>(), indices.data<int64_t>(), outer, src.size(dim), inner,
            k, sorted);
      });
    }
    return Tensors{values, indices};
  };
  Tensors out = autograd::record({
      .op = kTopk,
      .inputs = {x},
      .forward = forward,
      // dx: each gradient back at its index (indices of a row are distinct).
      .backward =
          [dim, in_shape](Node& node, const Tensors& g) {
            return Tensors{scatter_add_kernel("topk", Tensor::zeros(in_shape, g[0].dtype()), dim,
                                              node.saved_output(1), g[0])};
          },
      .save = {.outputs = {1}},
  });
  return {out[0], out[1]};
}

}  // namespace reprise::ops
