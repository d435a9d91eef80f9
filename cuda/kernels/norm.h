#pragma once
// rmsnorm and layernorm, forward and backward, in cpu/norm.cpp's order of
// roundings. M = rows, C = the normalised last dim, r = rstd of a row.
//
// rmsnorm:   y = w * (x * r),           r = (sum(x^2) / C + eps)^-1/2
//            dx = r * w * g - x * r^3 * sum(w * g * x) / C
//            dw = sum over rows of g * x * r
// layernorm: y = xhat * w + b,          xhat = (x - mean) * r
//            dx = r * (w * g - mean(w * g) - xhat * mean(w * g * xhat))
//            dw = sum over rows of g * xhat,  db = sum over rows of g
// The row statistics are 16-lane row sums (cuda/kernels/rows.h). dw and db
// are summed as the CPU does: rows in chunks of 32, each chunk's partial
// row in row order (one thread per column and chunk), then the partials in
// chunk order (one thread per column).

#include <cmath>

#include "cuda/kernels/rows.h"
#include "engine/backend.h"
#include "engine/tensor.h"

namespace reprise::cuda {

inline constexpr int64_t kNormChunkRows = 32;  // cpu/norm.cpp's kChunkRows

template <class T>
struct RmsnormKernel {
  static constexpr int kThreads = kRowThreads;
  const T* x;
  const T* w;
  T* y;
  T* rstd;
  int64_t M, C;
  double eps;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < M; };
      auto at = [&](int t) { return (row0 + t / kLanes) * C; };
      const auto ss = row_sum<T>(ctx, C, active, [&](int t, int64_t i) {
        const T v = x[at(t) + i];
        return v * v;
      });
      ctx.threads([&](int t) {
        if (!active(t)) return;
        const T r = T(1) / std::sqrt(ss[t] / T(C) + T(eps));
        if (t % kLanes == 0) rstd[row0 + t / kLanes] = r;
        for (int64_t i = t % kLanes; i < C; i += kLanes) y[at(t) + i] = w[i] * (x[at(t) + i] * r);
      });
    });
  }
};

template <class T>
struct RmsnormDxKernel {
  static constexpr int kThreads = kRowThreads;
  const T* x;
  const T* w;
  const T* rstd;
  const T* g;
  T* dx;
  int64_t M, C;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < M; };
      auto at = [&](int t) { return (row0 + t / kLanes) * C; };
      const auto dot = row_sum<T>(
          ctx, C, active, [&](int t, int64_t i) { return w[i] * g[at(t) + i] * x[at(t) + i]; });
      ctx.threads([&](int t) {
        if (!active(t)) return;
        const T r = rstd[row0 + t / kLanes];
        const T s = r * r * r * dot[t] / T(C);
        for (int64_t i = t % kLanes; i < C; i += kLanes)
          dx[at(t) + i] = r * w[i] * g[at(t) + i] - s * x[at(t) + i];
      });
    });
  }
};

template <class T>
struct LayernormKernel {
  static constexpr int kThreads = kRowThreads;
  const T* x;
  const T* w;
  const T* b;  // or null
  T* y;
  T* mean;
  T* rstd;
  int64_t M, C;
  double eps;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < M; };
      auto at = [&](int t) { return (row0 + t / kLanes) * C; };
      const auto sum = row_sum<T>(ctx, C, active, [&](int t, int64_t i) { return x[at(t) + i]; });
      auto mu = local<T>(ctx);
      ctx.threads([&](int t) { mu[t] = sum[t] / T(C); });
      const auto var = row_sum<T>(ctx, C, active, [&](int t, int64_t i) {
        const T d = x[at(t) + i] - mu[t];
        return d * d;
      });
      ctx.threads([&](int t) {
        if (!active(t)) return;
        const T r = T(1) / std::sqrt(var[t] / T(C) + T(eps));
        if (t % kLanes == 0) {
          mean[row0 + t / kLanes] = mu[t];
          rstd[row0 + t / kLanes] = r;
        }
        for (int64_t i = t % kLanes; i < C; i += kLanes) {
          const T v = (x[at(t) + i] - mu[t]) * r * w[i];
          y[at(t) + i] = b ? v + b[i] : v;
        }
      });
    });
  }
};

template <class T>
struct LayernormDxKernel {
  static constexpr int kThreads = kRowThreads;
  const T* x;
  const T* w;
  const T* mean;
  const T* rstd;
  const T* g;
  T* dx;
  int64_t M, C;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < M; };
      auto at = [&](int t) { return (row0 + t / kLanes) * C; };
      auto stat = [&](int t, T& mu, T& r) {
        mu = mean[row0 + t / kLanes];
        r = rstd[row0 + t / kLanes];
      };
      const auto a =
          row_sum<T>(ctx, C, active, [&](int t, int64_t i) { return w[i] * g[at(t) + i]; });
      const auto bb = row_sum<T>(ctx, C, active, [&](int t, int64_t i) {
        T mu, r;
        stat(t, mu, r);
        return w[i] * g[at(t) + i] * ((x[at(t) + i] - mu) * r);
      });
      ctx.threads([&](int t) {
        if (!active(t)) return;
        T mu, r;
        stat(t, mu, r);
        const T am = a[t] / T(C), bm = bb[t] / T(C);
        for (int64_t i = t % kLanes; i < C; i += kLanes) {
          const int64_t j = at(t) + i;
          dx[j] = r * (w[i] * g[j] - am - (x[j] - mu) * r * bm);
        }
      });
    });
  }
};

// The contributions to dw (or db) of row m, column c.
template <class T>
struct RmsDw {
  const T *x, *g, *rstd;
  REPRISE_HD T operator()(int64_t m, int64_t c, int64_t C) const {
    return g[m * C + c] * (x[m * C + c] * rstd[m]);
  }
};
template <class T>
struct LnDw {
  const T *x, *g, *mean, *rstd;
  REPRISE_HD T operator()(int64_t m, int64_t c, int64_t C) const {
    return g[m * C + c] * ((x[m * C + c] - mean[m]) * rstd[m]);
  }
};
template <class T>
struct LnDb {
  const T* g;
  REPRISE_HD T operator()(int64_t m, int64_t c, int64_t C) const { return g[m * C + c]; }
};

// partial[k, c] = the sum over the rows of chunk k, in order, of term(m, c).
template <class T, class Term>
struct ChunkPartialsKernel {
  static constexpr int kThreads = 256;
  T* partial;
  int64_t M, C, chunks;
  Term term;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t i = ctx.block() * kThreads + t; i < chunks * C; i += ctx.blocks() * kThreads) {
        const int64_t k = i / C, c = i % C;
        T s = T(0);
        const int64_t end = (k + 1) * kNormChunkRows < M ? (k + 1) * kNormChunkRows : M;
        for (int64_t m = k * kNormChunkRows; m < end; ++m) s += term(m, c, C);
        partial[i] = s;
      }
    });
  }
};

// out[c] = the sum over chunks, in order, of partial[k, c].
template <class T>
struct SumChunksKernel {
  static constexpr int kThreads = 256;
  const T* partial;
  T* out;
  int64_t C, chunks;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t c = ctx.block() * kThreads + t; c < C; c += ctx.blocks() * kThreads) {
        T s = T(0);
        for (int64_t k = 0; k < chunks; ++k) s += partial[k * C + c];
        out[c] = s;
      }
    });
  }
};

// The column sums of term over M rows, as cpu/norm.cpp adds them: (C).
template <class T, class Term, class Exec>
Tensor column_sums(const Exec& ex, int64_t M, int64_t C, const Term& term) {
  const int64_t chunks = (M + kNormChunkRows - 1) / kNormChunkRows;
  const Tensor partial = Tensor::empty({chunks, C}, dtype_of<T>(), ex.device());
  Tensor out = Tensor::empty({C}, dtype_of<T>(), ex.device());
  ex.launch(ChunkPartialsKernel<T, Term>{partial.data<T>(), M, C, chunks, term},
            blocks_for(chunks * C, 256));
  ex.launch(SumChunksKernel<T>{partial.data<T>(), out.data<T>(), C, chunks}, blocks_for(C, 256));
  return out;
}

inline Shape rows_shape(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

template <class Exec>
Tensors rmsnorm(const Exec& ex, const Tensor& x_in, const Tensor& w_in, double eps) {
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), ex.device());
  Tensor rstd = Tensor::empty(rows_shape(x.shape()), x.dtype(), ex.device());
  dispatch_float(x.dtype(), "rmsnorm", [&]<class T>() {
    ex.launch(RmsnormKernel<T>{x.data<T>(), w.data<T>(), y.data<T>(), rstd.data<T>(), M, C, eps},
              row_blocks(M));
  });
  return {y, rstd};
}

template <class Exec>
Tensors rmsnorm_backward(const Exec& ex, const Tensor& x_in, const Tensor& w_in,
                         const Tensor& rstd_in, const Tensor& g_in, bool need_dx, bool need_dw) {
  const Tensor x = x_in.contiguous(), rstd = rstd_in.contiguous(), g = g_in.contiguous();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor dx, dw;
  dispatch_float(x.dtype(), "rmsnorm", [&]<class T>() {
    if (need_dx) {
      const Tensor w = w_in.contiguous();
      dx = Tensor::empty(x.shape(), x.dtype(), ex.device());
      ex.launch(RmsnormDxKernel<T>{x.data<T>(), w.data<T>(), rstd.data<T>(), g.data<T>(),
                                   dx.data<T>(), M, C},
                row_blocks(M));
    }
    if (need_dw) dw = column_sums<T>(ex, M, C, RmsDw<T>{x.data<T>(), g.data<T>(), rstd.data<T>()});
  });
  return {dx, dw};
}

template <class Exec>
Tensors layernorm(const Exec& ex, const Tensor& x_in, const Tensor& w_in, const Tensor& b_in,
                  double eps) {
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), ex.device());
  Tensor mean = Tensor::empty(rows_shape(x.shape()), x.dtype(), ex.device());
  Tensor rstd = Tensor::empty(rows_shape(x.shape()), x.dtype(), ex.device());
  dispatch_float(x.dtype(), "layernorm", [&]<class T>() {
    ex.launch(LayernormKernel<T>{x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr,
                                 y.data<T>(), mean.data<T>(), rstd.data<T>(), M, C, eps},
              row_blocks(M));
  });
  return {y, mean, rstd};
}

template <class Exec>
Tensors layernorm_backward(const Exec& ex, const Tensor& x_in, const Tensor& w_in,
                           const Tensor& mean_in, const Tensor& rstd_in, const Tensor& g_in,
                           bool need_dx, bool need_dw, bool need_db) {
  const Tensor g = g_in.contiguous();
  const int64_t C = g.size(-1), M = g.numel() / C;
  Tensor dx, dw, db;
  dispatch_float(g.dtype(), "layernorm", [&]<class T>() {
    if (need_db) db = column_sums<T>(ex, M, C, LnDb<T>{g.data<T>()});
    if (!need_dx && !need_dw) return;
    const Tensor x = x_in.contiguous(), mean = mean_in.contiguous(), rstd = rstd_in.contiguous();
    if (need_dx) {
      const Tensor w = w_in.contiguous();
      dx = Tensor::empty(g.shape(), g.dtype(), ex.device());
      ex.launch(LayernormDxKernel<T>{x.data<T>(), w.data<T>(), mean.data<T>(), rstd.data<T>(),
                                     g.data<T>(), dx.data<T>(), M, C},
                row_blocks(M));
    }
    if (need_dw)
      dw = column_sums<T>(ex, M, C,
                          LnDw<T>{x.data<T>(), g.data<T>(), mean.data<T>(), rstd.data<T>()});
  });
  return {dx, dw, db};
}

}  // namespace reprise::cuda
