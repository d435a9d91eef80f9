// Indexing kernels on the CPU: the bounds of an index, gather and
// scatter-add along a dim (index_select and index_add are these with a
// broadcast index), topk, and the embedding lookup and its deterministic
// backward.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/backend.h"
#include "engine/lines_along.h"
#include "engine/strided_loop.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

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

IndexRange CpuBackend::index_range(const Tensor& index) {
  return dispatch_index(index.dtype(), "index_range", [&]<class I>() {
    const I* p = static_cast<const I*>(index.raw_data());
    // Runs go to several threads; each folds its extremes into these.
    std::atomic<int64_t> min{std::numeric_limits<int64_t>::max()};
    std::atomic<int64_t> max{std::numeric_limits<int64_t>::min()};
    for_each_run<1>(index.shape(), {index.strides()}, [&](auto off, int64_t n, auto st) {
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
      for (int64_t j = 0; j < n; ++j) {
        const int64_t v = int64_t(p[off[0] + j * st[0]]);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      for (int64_t cur = min.load(); lo < cur && !min.compare_exchange_weak(cur, lo);) {
      }
      for (int64_t cur = max.load(); hi > cur && !max.compare_exchange_weak(cur, hi);) {
      }
    });
    return IndexRange{min.load(), max.load()};
  });
}

Tensor CpuBackend::gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  // x's strides over the output positions, with dim contributed by the index.
  Shape xs = x.strides();
  const int64_t xd = xs[size_t(dim)];
  xs[size_t(dim)] = 0;
  dispatch_all(x.dtype(), "gather", [&]<class T>() {
    dispatch_index(index.dtype(), "gather", [&]<class I>() {
      T* po = out.data<T>();
      const T* px = static_cast<const T*>(x.raw_data());
      const I* pi = static_cast<const I*>(index.raw_data());
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

// A "line" is the set of p that share every coordinate but dim; a line only
// ever writes into its own line of out. Tasks own whole lines (blocks of the
// innermost coalesced run of lines) and add a line's contributions in
// increasing p[dim], so every sum has one fixed order.
void CpuBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index,
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
  dispatch_arith(out.dtype(), "scatter_add", [&]<class T>() {
    dispatch_index(index.dtype(), "scatter_add", [&]<class I>() {
      T* po = static_cast<T*>(out.raw_data());
      const T* ps = static_cast<const T*>(src.raw_data());
      const I* pi = static_cast<const I*>(index.raw_data());
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

Tensors CpuBackend::topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest, bool sorted) {
  const Tensor x = x_in.contiguous();
  Shape shape = x.shape();
  shape[size_t(dim)] = k;
  Tensor values = Tensor::empty(shape, x.dtype());
  Tensor indices = Tensor::empty(shape, DType::i64);
  const LinesAlong l = lines_along(x.shape(), dim);
  if (k > 0) {
    dispatch_arith(x.dtype(), "topk", [&]<class T>() {
      auto run = largest ? topk_rows<true, T> : topk_rows<false, T>;
      run(x.data<T>(), values.data<T>(), indices.data<int64_t>(), l.outer, l.n, l.inner, k, sorted);
    });
  }
  return {values, indices};
}

// A full sort is the top R of R, kept in order; topk's order ties by
// position, so equal keys keep theirs. f32 and i32 lines sort faster as
// one 64-bit integer per element whose order is topk's: the value's bits
// mapped to an order-preserving key in the high half (NaN above every
// number, -0 as +0, all inverted when descending), the position in the low
// half, so that equal values tie by position.
Tensors CpuBackend::sort(const Tensor& x_in, int64_t dim, bool descending) {
  if ((x_in.dtype() != DType::f32 && x_in.dtype() != DType::i32) ||
      x_in.size(dim) > int64_t(UINT32_MAX)) {
    return topk(x_in, x_in.size(dim), dim, descending, true);
  }
  const Tensor x = x_in.contiguous();
  Tensor values = Tensor::empty(x.shape(), x.dtype());
  Tensor indices = Tensor::empty(x.shape(), DType::i64);
  const LinesAlong l = lines_along(x.shape(), dim);
  const int64_t R = l.n, inner = l.inner;
  if (x.numel() == 0) return {values, indices};
  const bool floats = x.dtype() == DType::f32;
  const uint32_t* bits = static_cast<const uint32_t*>(x.raw_data());
  auto key_of = [&](uint32_t b) -> uint32_t {
    if (floats) {
      if ((b & 0x7FFFFFFFu) > 0x7F800000u) return descending ? 0 : ~0u;  // NaN
      if (b == 0x80000000u) b = 0;                                       // -0 is +0
      b = (b & 0x80000000u) ? ~b : b | 0x80000000u;
    } else {
      b ^= 0x80000000u;  // i32: two's complement to offset binary
    }
    return descending ? ~b : b;
  };
  uint32_t* out = static_cast<uint32_t*>(values.raw_data());
  int64_t* ix = indices.data<int64_t>();
  threads::parallel_for(
      l.outer * inner, std::max<int64_t>(1, 4096 / R), [&](int64_t m0, int64_t m1) {
        std::vector<uint64_t> line(static_cast<size_t>(R));
        for (int64_t m = m0; m < m1; ++m) {
          const int64_t first = m / inner * R * inner + m % inner;
          for (int64_t r = 0; r < R; ++r)
            line[size_t(r)] = uint64_t(key_of(bits[first + r * inner])) << 32 | uint64_t(r);
          std::sort(line.begin(), line.end());
          for (int64_t r = 0; r < R; ++r) {
            const int64_t at = int64_t(line[size_t(r)] & 0xFFFFFFFFu);
            out[first + r * inner] = bits[first + at * inner];
            ix[first + r * inner] = at;
          }
        }
      });
  return {values, indices};
}

Tensor CpuBackend::embedding(const Tensor& weight_in, const Tensor& ids_in) {
  const Tensor weight = weight_in.contiguous();
  const std::vector<int64_t> ids = ids_in.to_vector<int64_t>();
  const int64_t C = weight.size(1);
  Shape shape = ids_in.shape();
  shape.push_back(C);
  Tensor out = Tensor::empty(shape, weight.dtype());
  dispatch_float(weight.dtype(), "embedding", [&]<class T>() {
    const T* w = weight.data<T>();
    T* o = out.data<T>();
    threads::parallel_for(int64_t(ids.size()),
                          std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)),
                          [&](int64_t i0, int64_t i1) {
                            for (int64_t i = i0; i < i1; ++i) {
                              std::memcpy(o + i * C, w + ids[size_t(i)] * C, size_t(C) * sizeof(T));
                            }
                          });
  });
  return out;
}

// A counting sort groups the output rows by id, keeping each group in the
// order the ids appear; then each vocabulary row is summed by one thread,
// over its group in that order. No atomics, and the result does not depend
// on how vocabulary rows are split across threads.
Tensor CpuBackend::embedding_backward(const Tensor& g_in, const Tensor& ids_in, int64_t V) {
  const Tensor g = g_in.contiguous();
  const std::vector<int64_t> ids = ids_in.to_vector<int64_t>();
  const int64_t n = int64_t(ids.size()), C = g.size(-1);
  // start[v] .. start[v + 1]: the positions of id v in order[], which lists
  // output rows grouped by id, ascending within each group.
  std::vector<int64_t> start(size_t(V + 1), 0);
  for (int64_t id : ids) ++start[size_t(id + 1)];
  for (int64_t v = 0; v < V; ++v) start[size_t(v + 1)] += start[size_t(v)];
  std::vector<int64_t> order(static_cast<size_t>(n)), next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[size_t(next[size_t(ids[size_t(i)])]++)] = i;

  Tensor dw = Tensor::empty({V, C}, g.dtype());
  dispatch_float(g.dtype(), "embedding", [&]<class T>() {
    const T* pg = g.data<T>();
    T* pw = dw.data<T>();
    threads::parallel_for(V, std::max<int64_t>(1, 4096 / std::max<int64_t>(C, 1)),
                          [&](int64_t v0, int64_t v1) {
                            for (int64_t v = v0; v < v1; ++v) {
                              T* row = pw + v * C;
                              for (int64_t c = 0; c < C; ++c) row[c] = T(0);
                              for (int64_t k = start[size_t(v)]; k < start[size_t(v + 1)]; ++k) {
                                const T* gr = pg + order[size_t(k)] * C;
                                for (int64_t c = 0; c < C; ++c) row[c] += gr[c];
                              }
                            }
                          });
  });
  return dw;
}

REPRISE_CPU_END
