#pragma once
// moe_route and its backward, with cpu/moe_route.cpp's outputs:
//   1. per token, its experts (engine/route_choice.h): indices (N, k), top
//      (N, k) the chosen unbiased scores, and margin (N);
//   2. the assignments a = n k + j sorted by expert, stably (so in a order
//      within an expert): each expert's segment;
//   3. routed[e] = its segment's length, counts[e] = min(routed, capacity),
//      offsets by a prefix sum in expert order, M = the total;
//   4. an assignment of rank r < counts[e] in its expert's segment goes to
//      slot offset[e] + r: the earliest tokens first, as on the CPU.
// Backward, with dg scattered back to (N, k) (zero where dropped):
//   renormalize: dv_j = (dg_j - sum_l dg_l g_l) / S,  else dv_j = dg_j
//   dscores[n, i_j] = dv_j, zero elsewhere.

#include <limits>

#include "cuda/kernels/copy.h"
#include "cuda/kernels/indexing.h"
#include "engine/backend.h"
#include "engine/route_choice.h"
#include "engine/tensor.h"

namespace reprise::cuda {

// Per token: its experts and margin (engine/route_choice.h); nan[n] = n E + e
// of its first NaN score or bias (int64 max when none).
template <class T>
struct RouteTopkKernel {
  static constexpr int kThreads = 128;
  const T* scores;
  const T* bias;  // (E) or null
  int64_t* indices;
  T* top;  // the choice values, then (with a bias) the chosen scores
  int64_t* margin;
  int64_t* nan;
  int64_t N, E, k, n_group, topk_group;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, N, [&](int64_t n) {
        const T* row = scores + n * E;
        int64_t* idx = indices + n * k;
        T* val = top + n * k;
        nan[n] = std::numeric_limits<int64_t>::max();
        for (int64_t e = 0; e < E; ++e) {
          const bool is_nan = row[e] != row[e] || (bias && bias[e] != bias[e]);
          if (is_nan && nan[n] == std::numeric_limits<int64_t>::max()) nan[n] = n * E + e;
        }
        if (nan[n] != std::numeric_limits<int64_t>::max()) return;
        margin[n] = route::choose_experts(row, bias, E, k, n_group, topk_group, idx, val);
        if (bias) {
          for (int64_t j = 0; j < k; ++j) val[j] = row[idx[j]];
        }
      });
    });
  }
};

// Per expert e: the start of its segment in the sorted keys, routed[e] and
// counts[e]; then (thread 0, after a barrier) offsets in expert order and
// M = sizes[E].
struct RouteCountsKernel {
  static constexpr int kThreads = 256;
  const uint32_t* keys;  // sorted experts, (A = N k)
  int64_t A, E, capacity;
  int64_t* start;   // (E)
  int64_t* routed;  // (E)
  int64_t* counts;  // (E)
  int64_t* offset;  // (E + 1): offset[E] = M

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t e = t; e < E; e += kThreads) {
        // [lo, hi): the keys equal to e, by binary search.
        int64_t lo = 0, hi = A;
        while (lo < hi) {
          const int64_t mid = (lo + hi) / 2;
          if (int64_t(keys[mid]) < e) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        int64_t end = lo;
        hi = A;
        while (end < hi) {
          const int64_t mid = (end + hi) / 2;
          if (int64_t(keys[mid]) <= e) {
            end = mid + 1;
          } else {
            hi = mid;
          }
        }
        start[e] = lo;
        routed[e] = end - lo;
        counts[e] = capacity < 0 || end - lo < capacity ? end - lo : capacity;
      }
    });
    ctx.sync();
    ctx.threads([&](int t) {
      if (t != 0) return;
      int64_t m = 0;
      for (int64_t e = 0; e < E; ++e) {
        offset[e] = m;
        m += counts[e];
      }
      offset[E] = m;
    });
  }
};

// Per sorted assignment: its slot, gate, token and (N, k) position.
template <class T>
struct RouteScatterKernel {
  static constexpr int kThreads = 256;
  const uint32_t* keys;
  const int64_t* order;
  const int64_t *start, *counts, *offset;
  const T* top;
  T* weights;
  int64_t* token;
  int64_t* slot;
  int64_t A, k;
  bool renormalize;
  T scale;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, A, [&](int64_t p) {
        const int64_t e = keys[p], rank = p - start[e];
        if (rank >= counts[e]) return;  // dropped
        const int64_t m = offset[e] + rank, a = order[p], n = a / k;
        T sum = T(0);
        for (int64_t j = 0; j < k; ++j) sum += top[n * k + j];
        weights[m] = (renormalize ? top[a] / sum : top[a]) * scale;
        token[m] = n;
        slot[m] = a;
      });
    });
  }
};

template <class Exec>
Tensors moe_route(const Exec& ex, const Tensor& scores_in, const Tensor& bias_in,
                  const RouteParams& rp) {
  const Tensor scores = scores_in.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  const int64_t k = rp.k, capacity = rp.capacity;
  const int64_t N = scores.size(0), E = scores.size(1), A = N * k;
  const Device dev = ex.device();
  Tensor indices = Tensor::empty({N, k}, DType::i64, dev);
  Tensor top = Tensor::empty({N, k}, scores.dtype(), dev);
  Tensor margin = Tensor::empty({N}, DType::i64, dev);
  const Tensor nan = Tensor::empty({N}, DType::i64, dev);
  Tensor routed = Tensor::empty({E}, DType::i64, dev);
  Tensor counts = Tensor::empty({E}, DType::i64, dev);
  const Tensor start = Tensor::empty({E}, DType::i64, dev);
  const Tensor offset = Tensor::empty({E + 1}, DType::i64, dev);
  return dispatch_float(scores.dtype(), "moe_route", [&]<class T>() {
    ex.launch(RouteTopkKernel<T>{scores.data<T>(), bias.defined() ? bias.data<T>() : nullptr,
                                 indices.data<int64_t>(), top.data<T>(), margin.data<int64_t>(),
                                 nan.data<int64_t>(), N, E, k, rp.n_group, rp.topk_group},
              blocks_for(N, 128));
    if (N > 0) {
      const int64_t first_nan = index_range(ex, nan).min;
      REPRISE_CHECK(first_nan == std::numeric_limits<int64_t>::max(), "moe_route: score of token ",
                    first_nan / E, " for expert ", first_nan % E,
                    " (or that expert's bias) is NaN (scores ", scores_in.describe(), ")");
    }
    const std::pair<Tensor, Tensor> sorted = sort_by_target(ex, indices.data<int64_t>(), 1, A, E);
    const Tensor &keys = sorted.first, &order = sorted.second;
    ex.launch(RouteCountsKernel{static_cast<const uint32_t*>(keys.raw_data()), A, E, capacity,
                                start.data<int64_t>(), routed.data<int64_t>(),
                                counts.data<int64_t>(), offset.data<int64_t>()},
              1);
    int64_t M = 0;
    ex.download(&M, offset.data<int64_t>() + E, sizeof M);
    Tensor weights = Tensor::empty({M}, scores.dtype(), dev);
    Tensor token = Tensor::empty({M}, DType::i64, dev);
    Tensor slot = Tensor::empty({M}, DType::i64, dev);
    ex.launch(
        RouteScatterKernel<T>{static_cast<const uint32_t*>(keys.raw_data()), order.data<int64_t>(),
                              start.data<int64_t>(), counts.data<int64_t>(), offset.data<int64_t>(),
                              top.data<T>(), weights.data<T>(), token.data<int64_t>(),
                              slot.data<int64_t>(), A, k, rp.renormalize, T(rp.scale)},
        blocks_for(A, 256));
    return Tensors{weights, indices, token, counts, routed, margin, slot, top};
  });
}

// gg[slot[m]] = g[m] (slots are distinct).
template <class T>
struct SlotScatterKernel {
  static constexpr int kThreads = 256;
  const T* g;
  const int64_t* slot;
  T* gg;
  int64_t M;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads(
        [&](int t) { grid_stride<kThreads>(ctx, t, M, [&](int64_t m) { gg[slot[m]] = g[m]; }); });
  }
};

template <class T>
struct RouteBackwardKernel {
  static constexpr int kThreads = 128;
  const T* gg;  // (N, k)
  const T* top;
  const int64_t* indices;
  T* dx;  // (N, E), zeroed
  int64_t N, k, E;
  bool renormalize;
  T scale;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, N, [&](int64_t n) {
        const T* v = top + n * k;
        const T* d = gg + n * k;
        T sum = T(0), dot = T(0);
        for (int64_t j = 0; j < k; ++j) sum += v[j];
        for (int64_t j = 0; j < k; ++j) dot += d[j] * (v[j] / sum);
        for (int64_t j = 0; j < k; ++j)
          dx[n * E + indices[n * k + j]] = scale * (renormalize ? (d[j] - dot) / sum : d[j]);
      });
    });
  }
};

template <class Exec>
Tensor moe_route_backward(const Exec& ex, const Tensor& gw, const Tensor& indices_in,
                          const Tensor& slot_in, const Tensor& top_in, int64_t E,
                          const RouteParams& rp) {
  const Tensor g = gw.contiguous(), indices = indices_in.contiguous();
  const Tensor slot = slot_in.contiguous(), top = top_in.contiguous();
  const int64_t N = indices.size(0), k = indices.size(1), M = slot.size(0);
  const Tensor gg = Tensor::empty({N, k}, gw.dtype(), ex.device());
  Tensor dx = Tensor::empty({N, E}, gw.dtype(), ex.device());
  fill(ex, gg, 0.0);
  fill(ex, dx, 0.0);
  dispatch_float(gw.dtype(), "moe_route", [&]<class T>() {
    ex.launch(SlotScatterKernel<T>{g.data<T>(), slot.data<int64_t>(), gg.data<T>(), M},
              blocks_for(M, 256));
    ex.launch(RouteBackwardKernel<T>{gg.data<T>(), top.data<T>(), indices.data<int64_t>(),
                                     dx.data<T>(), N, k, E, rp.renormalize, T(rp.scale)},
              blocks_for(N, 128));
  });
  return dx;
}

}  // namespace reprise::cuda
