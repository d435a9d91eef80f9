#pragma once
// Indexing ops: index_select, gather, scatter_add, index_add, where, topk,
// sort.
//
// Index tensors are i32 or i64 and hold positions in [0, size of the indexed
// dim): negative values are not wrapped; every index is validated and a bad
// one raises naming the op, the value and the dim size. The adding ops
// (scatter_add, index_add, and the backward of index_select and gather)
// add the contributions to each destination element in increasing source
// position, one thread per destination element, so repeated indices give
// the same bits at any thread count. scatter_add and index_add are out of
// place: they return a new tensor.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

// Rows of x along dim, in the order of index (repeats allowed).
// x: (..., N, ...) any dtype, index: (K) -> (..., K, ...)
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

// out[p] = x[p with p[dim] replaced by index[p]].
// x: any dtype, index: same rank as x with index.size(d) <= x.size(d) for
// d != dim -> index.shape
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// x with src[p] added at x[p with p[dim] replaced by index[p]], for every p.
// x: f32/f64/i32/i64, index and src: one shape S, the rank of x, with
// S[d] <= x.size(d) for d != dim -> x.shape
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// x with slice k of src along dim added to slice index[k] of x.
// x: (..., N, ...) f32/f64/i32/i64, index: (K), src: (..., K, ...) -> x.shape
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// a where cond is true, else b, with numpy broadcasting of all three.
// cond: bool, a and b: one dtype (any) -> broadcast shape
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// where with a scalar of the tensor's dtype on one side.
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
// x with value where mask (bool, broadcasting to x's shape) is true:
// where(mask, value, x), torch's masked_fill.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

struct TopKResult {
  Tensor values;   // x's dtype, differentiable
  Tensor indices;  // i64, positions along dim
};

// The k largest (or smallest) entries along dim.  x: (..., N, ...)
// f32/f64/i32/i64, k in [0, N] -> values and indices (..., k, ...).
// The order is total: larger values first (smaller with largest = false);
// equal values, including -0 and +0, by lower index first; NaN counts as
// larger than every number (so NaNs come first when largest, last
// otherwise). sorted = false returns the same k entries in increasing index
// order.
TopKResult topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                bool sorted = true);

// x sorted along dim in topk's order: ascending (NaN last), or descending
// (NaN first). Equal values keep their order, so the sort is stable, as
// torch's stable=True.  x: (..., N, ...) f32/f64/i32/i64 -> values and
// indices of x's shape.
TopKResult sort(const Tensor& x, int64_t dim = -1, bool descending = false);
// sort's indices alone (not differentiable).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);

}  // namespace reprise::ops
