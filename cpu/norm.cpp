// rmsnorm and layernorm on the CPU: fused forward kernels saving per-row
// statistics, and fused backward kernels. M = rows, C = the normalised last
// dim; r = rstd of a row.
//
// rmsnorm:   y = w * (x * r),           r = (sum(x^2) / C + eps)^-1/2
//            dx = r * w * g - x * r^3 * sum(w * g * x) / C
//            dw = sum over rows of g * x * r
// layernorm: y = xhat * w + b,          xhat = (x - mean) * r
//            dx = r * (w * g - mean(w * g) - xhat * mean(w * g * xhat))
//            dw = sum over rows of g * xhat,  db = sum over rows of g
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/backend.h"
#include "cpu/rows.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

// Backward rows are processed in fixed chunks of kChunkRows. Each chunk sums
// its rows' contributions to dw (and db) into its own partial row, and the
// partials are added in chunk order afterwards: the chunking depends on the
// row count only, never on the thread count, so dw is deterministic.
constexpr int64_t kChunkRows = 32;

int64_t num_chunks(int64_t M) { return (M + kChunkRows - 1) / kChunkRows; }

int64_t chunk_grain(int64_t C) { return std::max<int64_t>(1, 16384 / (kChunkRows * C)); }

// partials: (chunks, C) -> out: (C), summed over chunks in chunk order.
template <class T>
void sum_partials(const std::vector<T>& partials, int64_t chunks, int64_t C, T* out) {
  for (int64_t c = 0; c < C; ++c) out[c] = T(0);
  for (int64_t k = 0; k < chunks; ++k) {
    const T* p = partials.data() + k * C;
    for (int64_t c = 0; c < C; ++c) out[c] += p[c];
  }
}

Shape rows_shape(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

}  // namespace

Tensors CpuBackend::rmsnorm(const Tensor& x_in, const Tensor& w_in, double eps) {
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty(rows_shape(x.shape()), x.dtype());
  dispatch_float(x.dtype(), "rmsnorm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* py = y.data<T>();
    T* pr = rstd.data<T>();
    threads::parallel_for(M, row_grain(C), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* xr = px + m * C;
        T* yr = py + m * C;
        const T ms = row_sum<T>(C,
                                [&](int64_t i, int64_t valid) {
                                  const V16<T> v = row_load(xr, i, valid);
                                  return v * v;
                                }) /
                     T(C);
        const T r = T(1) / std::sqrt(ms + T(eps));
        pr[m] = r;
        // HF's order: normalise first, then weight.
        for (int64_t c = 0; c < C; ++c) yr[c] = pw[c] * (xr[c] * r);
      }
    });
  });
  return {y, rstd};
}

Tensors CpuBackend::rmsnorm_backward(const Tensor& x_in, const Tensor& w_in, const Tensor& rstd_in,
                                     const Tensor& g_in, bool need_dx, bool need_dw) {
  const Tensor x = x_in.contiguous(), rstd = rstd_in.contiguous(), g = g_in.contiguous();
  const Tensor w = need_dx ? w_in.contiguous() : Tensor();
  const int64_t C = x.size(-1), M = x.numel() / C, chunks = num_chunks(M);
  Tensor dx = need_dx ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
  Tensor dw = need_dw ? Tensor::empty({C}, x.dtype()) : Tensor();
  dispatch_float(x.dtype(), "rmsnorm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pg = g.data<T>();
    const T* pr = rstd.data<T>();
    const T* pw = need_dx ? w.data<T>() : nullptr;
    T* pdx = need_dx ? dx.data<T>() : nullptr;
    std::vector<T> partial(need_dw ? size_t(chunks * C) : 0, T(0));
    threads::parallel_for(chunks, chunk_grain(C), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        T* part = need_dw ? partial.data() + k * C : nullptr;
        for (int64_t m = k * kChunkRows; m < std::min(M, (k + 1) * kChunkRows); ++m) {
          const T* xr = px + m * C;
          const T* gr = pg + m * C;
          const T r = pr[m];
          if (pdx) {
            T* dr = pdx + m * C;
            const T dot = row_sum<T>(C, [&](int64_t i, int64_t valid) {
              return row_load(pw, i, valid) * row_load(gr, i, valid) * row_load(xr, i, valid);
            });
            const T s = r * r * r * dot / T(C);
            for (int64_t c = 0; c < C; ++c) dr[c] = r * pw[c] * gr[c] - s * xr[c];
          }
          if (part) {
            for (int64_t c = 0; c < C; ++c) part[c] += gr[c] * (xr[c] * r);
          }
        }
      }
    });
    if (need_dw) sum_partials(partial, chunks, C, dw.data<T>());
  });
  return {dx, dw};
}

Tensors CpuBackend::layernorm(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in,
                              double eps) {
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty(rows_shape(x.shape()), x.dtype());
  Tensor rstd = Tensor::empty(rows_shape(x.shape()), x.dtype());
  dispatch_float(x.dtype(), "layernorm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    T* py = y.data<T>();
    T* pm = mean.data<T>();
    T* pr = rstd.data<T>();
    threads::parallel_for(M, row_grain(C), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* xr = px + m * C;
        T* yr = py + m * C;
        // Two passes over a row that is in cache: the centred sum of
        // squares does not cancel the way E[x^2] - E[x]^2 does.
        const T mu =
            row_sum<T>(C, [&](int64_t i, int64_t valid) { return row_load(xr, i, valid); }) / T(C);
        const V16<T> muv = V16<T>::splat(mu);
        const T var = row_sum<T>(C, [&](int64_t i, int64_t valid) {
          const V16<T> d = row_load(xr, i, valid) - muv;
          return d * d;
        });
        const T r = T(1) / std::sqrt(var / T(C) + T(eps));
        pm[m] = mu;
        pr[m] = r;
        if (pb) {
          for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mu) * r * pw[c] + pb[c];
        } else {
          for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mu) * r * pw[c];
        }
      }
    });
  });
  return {y, mean, rstd};
}

Tensors CpuBackend::layernorm_backward(const Tensor& x_in, const Tensor& w_in,
                                       const Tensor& mean_in, const Tensor& rstd_in,
                                       const Tensor& g_in, bool need_dx, bool need_dw,
                                       bool need_db) {
  const Tensor g = g_in.contiguous();
  const int64_t C = g.size(-1), M = g.numel() / C, chunks = num_chunks(M);
  Tensor x, w, mean, rstd;
  if (need_dx || need_dw) {
    x = x_in.contiguous();
    mean = mean_in.contiguous();
    rstd = rstd_in.contiguous();
  }
  if (need_dx) w = w_in.contiguous();
  Tensor dx = need_dx ? Tensor::empty(g.shape(), g.dtype()) : Tensor();
  Tensor dw = need_dw ? Tensor::empty({C}, g.dtype()) : Tensor();
  Tensor db = need_db ? Tensor::empty({C}, g.dtype()) : Tensor();
  dispatch_float(g.dtype(), "layernorm", [&]<class T>() {
    const T* pg = g.data<T>();
    const T* px = x.defined() ? x.data<T>() : nullptr;
    const T* pm = x.defined() ? mean.data<T>() : nullptr;
    const T* pr = x.defined() ? rstd.data<T>() : nullptr;
    const T* pw = need_dx ? w.data<T>() : nullptr;
    T* pdx = need_dx ? dx.data<T>() : nullptr;
    std::vector<T> partial_w(need_dw ? size_t(chunks * C) : 0, T(0));
    std::vector<T> partial_b(need_db ? size_t(chunks * C) : 0, T(0));
    threads::parallel_for(chunks, chunk_grain(C), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        T* part_w = need_dw ? partial_w.data() + k * C : nullptr;
        T* part_b = need_db ? partial_b.data() + k * C : nullptr;
        for (int64_t m = k * kChunkRows; m < std::min(M, (k + 1) * kChunkRows); ++m) {
          const T* gr = pg + m * C;
          if (part_b) {
            for (int64_t c = 0; c < C; ++c) part_b[c] += gr[c];
          }
          if (!px) continue;
          const T* xr = px + m * C;
          const T mu = pm[m], r = pr[m];
          if (pdx) {
            T* dr = pdx + m * C;
            const V16<T> muv = V16<T>::splat(mu), rv = V16<T>::splat(r);
            const T a = row_sum<T>(C,
                                   [&](int64_t i, int64_t valid) {
                                     return row_load(pw, i, valid) * row_load(gr, i, valid);
                                   }) /
                        T(C);
            const T bb = row_sum<T>(C,
                                    [&](int64_t i, int64_t valid) {
                                      return row_load(pw, i, valid) * row_load(gr, i, valid) *
                                             ((row_load(xr, i, valid) - muv) * rv);
                                    }) /
                         T(C);
            for (int64_t c = 0; c < C; ++c) dr[c] = r * (pw[c] * gr[c] - a - (xr[c] - mu) * r * bb);
          }
          if (part_w) {
            for (int64_t c = 0; c < C; ++c) part_w[c] += gr[c] * ((xr[c] - mu) * r);
          }
        }
      }
    });
    if (need_dw) sum_partials(partial_w, chunks, C, dw.data<T>());
    if (need_db) sum_partials(partial_b, chunks, C, db.data<T>());
  });
  return {dx, dw, db};
}

REPRISE_CPU_END
