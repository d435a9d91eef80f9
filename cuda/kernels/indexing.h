#pragma once
// Indexing: the bounds of an index, gather, scatter-add, topk, sort, and the
// embedding lookup and its backward, with cpu/indexing.cpp's results.
//
// Sums where several elements land on one output (scatter_add,
// index_add, embedding_backward) are made deterministic by sorted
// segments: the positions are sorted by target, stably, so each target's
// contributions form one segment in increasing position, which a single
// thread adds in that order, the CPU's order. No atomics.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cuda/kernels/copy.h"
#include "cuda/kernels/rows.h"
#include "cuda/kernels/strided.h"
#include "engine/backend.h"
#include "engine/lines_along.h"
#include "engine/tensor.h"

namespace reprise::cuda {

// min and max of an index (one block; integers, so any order).
template <class I>
struct IndexRangeKernel {
  static constexpr int kThreads = 1024;
  const I* index;
  Strided<1> layout;
  int64_t n;
  int64_t* out;  // {min, max}

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    int64_t* scratch = reinterpret_cast<int64_t*>(ctx.shared());
    auto lo = local<int64_t>(ctx);
    auto hi = local<int64_t>(ctx);
    ctx.threads([&](int t) {
      lo[t] = std::numeric_limits<int64_t>::max();
      hi[t] = std::numeric_limits<int64_t>::min();
      for (int64_t i = t; i < n; i += kThreads) {
        int64_t off[1];
        layout.offsets(i, off);
        const int64_t v = int64_t(index[off[0]]);
        lo[t] = v < lo[t] ? v : lo[t];
        hi[t] = v > hi[t] ? v : hi[t];
      }
    });
    block_reduce(ctx, lo, scratch, [](int64_t a, int64_t b) { return a < b ? a : b; });
    block_reduce(ctx, hi, scratch, [](int64_t a, int64_t b) { return a > b ? a : b; });
    ctx.threads([&](int t) {
      if (t != 0) return;
      out[0] = lo[t];
      out[1] = hi[t];
    });
  }
};

template <class Exec>
IndexRange index_range(const Exec& ex, const Tensor& index) {
  const Tensor out = Tensor::empty({2}, DType::i64, ex.device());
  dispatch_index(index.dtype(), "index_range", [&]<class I>() {
    ex.launch(IndexRangeKernel<I>{static_cast<const I*>(index.raw_data()),
                                  strided<1>(index.shape(), {index.strides()}), index.numel(),
                                  out.data<int64_t>()},
              1, 32 * sizeof(int64_t));
  });
  int64_t host[2];
  ex.download(host, out.raw_data(), sizeof host);
  return {host[0], host[1]};
}

// out[p] = x[p with p[dim] = index[p]]; layout over index's shape: out, x
// (0 along dim), index.
template <class T, class I>
struct GatherKernel {
  static constexpr int kThreads = 256;
  T* out;
  const T* x;
  const I* index;
  Strided<3> layout;
  int64_t n, x_dim_stride;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        int64_t off[3];
        layout.offsets(i, off);
        out[off[0]] = x[off[1] + int64_t(index[off[2]]) * x_dim_stride];
      });
    });
  }
};

template <class Exec>
Tensor gather(const Exec& ex, const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = Tensor::empty(index.shape(), x.dtype(), ex.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  Shape xs = x.strides();
  const int64_t xd = xs[size_t(dim)];
  xs[size_t(dim)] = 0;
  const Strided<3> layout = strided<3>(index.shape(), {out.strides(), xs, index.strides()});
  dispatch_all(x.dtype(), "gather", [&]<class T>() {
    dispatch_index(index.dtype(), "gather", [&]<class I>() {
      ex.launch(GatherKernel<T, I>{out.data<T>(), static_cast<const T*>(x.raw_data()),
                                   static_cast<const I*>(index.raw_data()), layout, n, xd},
                blocks_for(n, 256));
    });
  });
  return out;
}

// Lines: the positions that share every coordinate but dim. A line adds
// into its own line of out only, so lines are independent; within a line,
// position j adds src[j] to out[index[j]] in increasing j.
struct Lines {
  Strided<3> layout;  // over the lines: out, src, index
  int64_t lines, count, od, sd, id;
};

// One thread per line, j in order (the CPU's loop).
template <class T, class I>
struct ScatterLinesKernel {
  static constexpr int kThreads = 256;
  T* out;
  const T* src;
  const I* index;
  Lines l;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, l.lines, [&](int64_t e) {
        int64_t off[3];
        l.layout.offsets(e, off);
        for (int64_t j = 0; j < l.count; ++j)
          out[off[0] + int64_t(index[off[2] + j * l.id]) * l.od] += src[off[1] + j * l.sd];
      });
    });
  }
};

// The index the same for every line (index_add, index_select's backward):
// order[p] lists positions j sorted by target (keys), stably. A thread per
// (segment start p, line) adds the segment's sources in order.
template <class T>
struct ScatterSegmentsKernel {
  static constexpr int kThreads = 256;
  T* out;
  const T* src;
  const uint32_t* keys;  // sorted targets
  const int64_t* order;  // positions j, grouped by target, ascending in each
  Lines l;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, l.count * l.lines, [&](int64_t i) {
        const int64_t p = i / l.lines, e = i % l.lines;
        if (p > 0 && keys[p] == keys[p - 1]) return;  // not a segment's start
        int64_t off[3];
        l.layout.offsets(e, off);
        T* o = out + off[0] + int64_t(keys[p]) * l.od;
        T acc = *o;
        for (int64_t q = p; q < l.count && keys[q] == keys[p]; ++q)
          acc += src[off[1] + order[q] * l.sd];
        *o = acc;
      });
    });
  }
};

// keys[j] = index[j * stride] as uint32, values[j] = j.
template <class I>
struct SortInputKernel {
  static constexpr int kThreads = 256;
  const I* index;
  int64_t stride, n;
  uint32_t* keys;
  int64_t* values;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t j) {
        keys[j] = uint32_t(index[j * stride]);
        values[j] = j;
      });
    });
  }
};

// Bits a radix sort of keys below `bound` needs.
inline int key_bits(int64_t bound) {
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) < bound) ++bits;
  return bits;
}

// The positions [0, n) sorted by index[j * stride] (in [0, bound)), stably:
// {sorted keys (n) u32-as-i32 storage, order (n) i64}.
template <class I, class Exec>
std::pair<Tensor, Tensor> sort_by_target(const Exec& ex, const I* index, int64_t stride, int64_t n,
                                         int64_t bound) {
  const Tensor keys = Tensor::empty({n}, DType::i32, ex.device());
  const Tensor values = Tensor::empty({n}, DType::i64, ex.device());
  Tensor sorted = Tensor::empty({n}, DType::i32, ex.device());
  Tensor order = Tensor::empty({n}, DType::i64, ex.device());
  ex.launch(SortInputKernel<I>{index, stride, n, static_cast<uint32_t*>(keys.raw_data()),
                               values.data<int64_t>()},
            blocks_for(n, 256));
  ex.sort_pairs(static_cast<const uint32_t*>(keys.raw_data()),
                static_cast<uint32_t*>(sorted.raw_data()), values.data<int64_t>(),
                order.data<int64_t>(), n, key_bits(bound));
  return {sorted, order};
}

template <class Exec>
void scatter_add(const Exec& ex, const Tensor& out, int64_t dim, const Tensor& index,
                 const Tensor& src) {
  const Shape& shape = src.shape();
  if (numel(shape) == 0) return;
  Shape lines_shape = shape;
  lines_shape[size_t(dim)] = 1;
  Lines l{.layout = strided<3>(lines_shape, {out.strides(), src.strides(), index.strides()}),
          .lines = numel(lines_shape),
          .count = shape[size_t(dim)],
          .od = out.stride(dim),
          .sd = src.stride(dim),
          .id = index.stride(dim)};
  // Whether the index is one vector over dim, the same for every line.
  bool shared = true;
  for (int64_t d = 0; d < index.dim(); ++d)
    shared = shared && (d == dim || index.stride(d) == 0 || shape[size_t(d)] == 1);
  dispatch_arith(out.dtype(), "scatter_add", [&]<class T>() {
    dispatch_index(index.dtype(), "scatter_add", [&]<class I>() {
      T* po = static_cast<T*>(out.raw_data());
      const T* ps = static_cast<const T*>(src.raw_data());
      const I* pi = static_cast<const I*>(index.raw_data());
      if (!shared || l.count == 1) {
        ex.launch(ScatterLinesKernel<T, I>{po, ps, pi, l}, blocks_for(l.lines, 256));
        return;
      }
      const std::pair<Tensor, Tensor> sorted = sort_by_target(ex, pi, l.id, l.count, out.size(dim));
      const Tensor &keys = sorted.first, &order = sorted.second;
      ex.launch(ScatterSegmentsKernel<T>{po, ps, static_cast<const uint32_t*>(keys.raw_data()),
                                         order.data<int64_t>(), l},
                blocks_for(l.count * l.lines, 256));
    });
  });
}

// ---- topk and sort ----------------------------------------------------------

// topk's total order: whether (a at ia) comes before (b at ib): by value
// (largest or smallest first, NaN above every number), then lower index.
template <bool Largest, class T>
REPRISE_HD bool ranks_before(T a, int64_t ia, T b, int64_t ib) {
  bool an = false, bn = false;
  if constexpr (std::is_floating_point_v<T>) {
    an = a != a;
    bn = b != b;
  }
  if (an != bn) return Largest ? an : bn;
  if (!an && a != b) return Largest ? a > b : a < b;
  return ia < ib;
}

// One thread per row (outer, inner) of x (outer, R, inner): the k first
// under topk's total order (value, NaN above every number, then lower
// index), kept sorted by insertion in the outputs; unsorted output is then
// reordered by index. The order is total, so the CPU's selection gives the
// same entries.
template <class T, bool Largest>
struct TopkKernel {
  static constexpr int kThreads = 128;
  const T* x;
  T* values;
  int64_t* indices;
  int64_t rows, R, inner, k;
  bool sorted;

  REPRISE_HD static bool before(T a, int64_t ia, T b, int64_t ib) {
    return ranks_before<Largest>(a, ia, b, ib);
  }

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, rows, [&](int64_t m) {
        const int64_t o = m / inner, i = m % inner;
        const T* in = x + o * R * inner + i;
        T* v = values + o * k * inner + i;
        int64_t* ix = indices + o * k * inner + i;
        int64_t filled = 0;
        for (int64_t r = 0; r < R; ++r) {
          const T e = in[r * inner];
          if (filled == k && !before(e, r, v[(k - 1) * inner], ix[(k - 1) * inner])) continue;
          int64_t p = filled < k ? filled++ : k - 1;
          for (; p > 0 && before(e, r, v[(p - 1) * inner], ix[(p - 1) * inner]); --p) {
            v[p * inner] = v[(p - 1) * inner];
            ix[p * inner] = ix[(p - 1) * inner];
          }
          v[p * inner] = e;
          ix[p * inner] = r;
        }
        if (sorted) return;
        for (int64_t a = 1; a < k; ++a) {  // insertion sort by index
          const T e = v[a * inner];
          const int64_t r = ix[a * inner];
          int64_t p = a;
          for (; p > 0 && ix[(p - 1) * inner] > r; --p) {
            v[p * inner] = v[(p - 1) * inner];
            ix[p * inner] = ix[(p - 1) * inner];
          }
          v[p * inner] = e;
          ix[p * inner] = r;
        }
      });
    });
  }
};

template <class Exec>
Tensors topk(const Exec& ex, const Tensor& x_in, int64_t k, int64_t dim, bool largest,
             bool sorted) {
  const Tensor x = x_in.contiguous();
  Shape shape = x.shape();
  shape[size_t(dim)] = k;
  Tensor values = Tensor::empty(shape, x.dtype(), ex.device());
  Tensor indices = Tensor::empty(shape, DType::i64, ex.device());
  const LinesAlong l = lines_along(x.shape(), dim);
  const int64_t rows = l.outer * l.inner;
  if (k == 0 || rows == 0) return {values, indices};
  dispatch_arith(x.dtype(), "topk", [&]<class T>() {
    auto run = [&]<bool Largest>() {
      ex.launch(TopkKernel<T, Largest>{x.data<T>(), values.data<T>(), indices.data<int64_t>(), rows,
                                       l.n, l.inner, k, sorted},
                blocks_for(rows, 128));
    };
    largest ? run.template operator()<true>() : run.template operator()<false>();
  });
  return {values, indices};
}

// Each line along dim sorted in topk's order by one block: a bottom-up merge
// sort in two buffers of the line, where each pass merges pairs of sorted
// runs of `width`, every element at once: its place is its rank in its own
// run plus the number of the partner run's elements before it, found by
// binary search. The order is total (ties go by position), so the result is
// the one sorted line the CPU gives. log2(R) passes of O(R log R) work.
template <class T, bool Descending>
struct SortLinesKernel {
  static constexpr int kThreads = 256;
  const T* x;
  T* values;
  int64_t* indices;
  T* buffer_values;         // (lines, 2, R)
  int64_t* buffer_indices;  // (lines, 2, R)
  int64_t lines, R, inner;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for (int64_t m = ctx.block(); m < lines; m += ctx.blocks()) {
      const int64_t line = m / inner * R * inner + m % inner;  // its first element
      T* v[2] = {buffer_values + m * 2 * R, buffer_values + m * 2 * R + R};
      int64_t* ix[2] = {buffer_indices + m * 2 * R, buffer_indices + m * 2 * R + R};
      ctx.threads([&](int t) {
        for (int64_t p = t; p < R; p += kThreads) {
          v[0][p] = x[line + p * inner];
          ix[0][p] = p;
        }
      });
      ctx.sync();
      int from = 0;
      for (int64_t width = 1; width < R; width *= 2, from = 1 - from) {
        ctx.threads([&](int t) {
          for (int64_t p = t; p < R; p += kThreads)
            merge_one(v[from], ix[from], v[1 - from], ix[1 - from], p, width);
        });
        ctx.sync();
      }
      ctx.threads([&](int t) {
        for (int64_t p = t; p < R; p += kThreads) {
          values[line + p * inner] = v[from][p];
          indices[line + p * inner] = ix[from][p];
        }
      });
      ctx.sync();
    }
  }

  // Moves element p of a pass's input (sorted runs of `width`) to its place
  // in the merge of its run with the partner run.
  REPRISE_HD void merge_one(const T* sv, const int64_t* si, T* dv, int64_t* di, int64_t p,
                            int64_t width) const {
    const int64_t run = p / width, start = run * width;
    const bool left = run % 2 == 0;
    const int64_t merged = left ? start : start - width;
    int64_t lo = left ? start + width : start - width;
    int64_t hi = left ? (start + 2 * width < R ? start + 2 * width : R) : start;
    if (lo > hi) lo = hi;  // a last left run with no partner
    const int64_t first = lo;
    while (lo < hi) {  // the partner's elements before p form a prefix
      const int64_t mid = lo + (hi - lo) / 2;
      if (ranks_before<Descending>(sv[mid], si[mid], sv[p], si[p])) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t at = merged + (p - start) + (lo - first);
    dv[at] = sv[p];
    di[at] = si[p];
  }
};

template <class Exec>
Tensors sort(const Exec& ex, const Tensor& x_in, int64_t dim, bool descending) {
  const Tensor x = x_in.contiguous();
  Tensor values = Tensor::empty(x.shape(), x.dtype(), ex.device());
  Tensor indices = Tensor::empty(x.shape(), DType::i64, ex.device());
  if (x.numel() == 0) return {values, indices};
  const LinesAlong l = lines_along(x.shape(), dim);
  const int64_t lines = l.outer * l.inner;
  Tensor buffer_values = Tensor::empty({lines, 2, l.n}, x.dtype(), ex.device());
  Tensor buffer_indices = Tensor::empty({lines, 2, l.n}, DType::i64, ex.device());
  dispatch_arith(x.dtype(), "sort", [&]<class T>() {
    auto run = [&]<bool Descending>() {
      ex.launch(SortLinesKernel<T, Descending>{x.data<T>(), values.data<T>(),
                                               indices.data<int64_t>(), buffer_values.data<T>(),
                                               buffer_indices.data<int64_t>(), lines, l.n, l.inner},
                std::min<int64_t>(lines, kMaxBlocks));
    };
    descending ? run.template operator()<true>() : run.template operator()<false>();
  });
  return {values, indices};
}

// ---- embedding --------------------------------------------------------------

template <class T, class I>
struct EmbeddingKernel {
  static constexpr int kThreads = 256;
  const T* weight;
  const I* ids;
  T* out;
  int64_t n, C;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n * C,
                            [&](int64_t i) { out[i] = weight[int64_t(ids[i / C]) * C + i % C]; });
    });
  }
};

// dweight rows from segments of positions sorted by id: a thread per
// (segment start p, column c) sums g[order[q], c] over its segment in
// order, from 0 (rows no id names stay as filled: 0).
template <class T>
struct EmbeddingBackwardKernel {
  static constexpr int kThreads = 256;
  const T* g;
  const uint32_t* keys;
  const int64_t* order;
  T* dw;
  int64_t n, C;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n * C, [&](int64_t i) {
        const int64_t p = i / C, c = i % C;
        if (p > 0 && keys[p] == keys[p - 1]) return;
        T acc = T(0);
        for (int64_t q = p; q < n && keys[q] == keys[p]; ++q) acc += g[order[q] * C + c];
        dw[int64_t(keys[p]) * C + c] = acc;
      });
    });
  }
};

template <class Exec>
Tensor embedding(const Exec& ex, const Tensor& weight_in, const Tensor& ids_in) {
  const Tensor weight = weight_in.contiguous(), ids = ids_in.contiguous();
  const int64_t C = weight.size(1), n = ids.numel();
  Shape shape = ids.shape();
  shape.push_back(C);
  Tensor out = Tensor::empty(shape, weight.dtype(), ex.device());
  if (n * C == 0) return out;
  dispatch_float(weight.dtype(), "embedding", [&]<class T>() {
    dispatch_index(ids.dtype(), "embedding", [&]<class I>() {
      ex.launch(EmbeddingKernel<T, I>{weight.data<T>(), static_cast<const I*>(ids.raw_data()),
                                      out.data<T>(), n, C},
                blocks_for(n * C, 256));
    });
  });
  return out;
}

template <class Exec>
Tensor embedding_backward(const Exec& ex, const Tensor& g_in, const Tensor& ids_in, int64_t V) {
  const Tensor g = g_in.contiguous(), ids = ids_in.contiguous();
  const int64_t n = ids.numel(), C = g.size(-1);
  Tensor dw = Tensor::empty({V, C}, g.dtype(), ex.device());
  fill(ex, dw, 0.0);
  if (n * C == 0) return dw;
  dispatch_float(g.dtype(), "embedding", [&]<class T>() {
    dispatch_index(ids.dtype(), "embedding", [&]<class I>() {
      const std::pair<Tensor, Tensor> sorted =
          sort_by_target(ex, static_cast<const I*>(ids.raw_data()), 1, n, V);
      const Tensor &keys = sorted.first, &order = sorted.second;
      ex.launch(
          EmbeddingBackwardKernel<T>{g.data<T>(), static_cast<const uint32_t*>(keys.raw_data()),
                                     order.data<int64_t>(), dw.data<T>(), n, C},
          blocks_for(n * C, 256));
    });
  });
  return dw;
}

}  // namespace reprise::cuda
