#pragma once
// Reductions, in cpu/reduce.cpp's orders: sums over the middle of
// (A, R, B) (each output a 16-lane row sum when B = 1, else a sum over r in
// order), running sums over r in order, the first maximum of each row with
// its index (NaN above every number), and the f64 sums of squares of
// 4096-element chunks.

#include <cmath>

#include "cuda/kernels/rows.h"
#include "engine/backend.h"
#include "engine/tensor.h"

namespace reprise::cuda {

template <class T>
struct SumRowsKernel {  // B = 1: rows of R
  static constexpr int kThreads = kRowThreads;
  const T* x;
  T* out;
  int64_t A, R;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, A, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < A; };
      const auto s = row_sum<T>(ctx, R, active,
                                [&](int t, int64_t i) { return x[(row0 + t / kLanes) * R + i]; });
      ctx.threads([&](int t) {
        if (active(t) && t % kLanes == 0) out[row0 + t / kLanes] = s[t];
      });
    });
  }
};

template <class T>
struct SumMiddleKernel {  // B > 1: one thread per output, r in order
  static constexpr int kThreads = 256;
  const T* x;
  T* out;
  int64_t A, R, B;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t i = ctx.block() * kThreads + t; i < A * B; i += ctx.blocks() * kThreads) {
        const int64_t a = i / B, b = i % B;
        T s = T(0);
        for (int64_t r = 0; r < R; ++r) s += x[(a * R + r) * B + b];
        out[i] = s;
      }
    });
  }
};

// Running sums over the middle of (A, R, B): one thread per column (a, b),
// r in order (from the end when reverse), the CPU's additions one by one.
template <class T>
struct CumsumMiddleKernel {
  static constexpr int kThreads = 256;
  const T* x;
  T* out;
  int64_t A, R, B;
  bool reverse;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t c = ctx.block() * kThreads + t; c < A * B; c += ctx.blocks() * kThreads) {
        const int64_t a = c / B, b = c % B;
        T s = T(0);
        for (int64_t i = 0; i < R; ++i) {
          const int64_t at = (a * R + (reverse ? R - 1 - i : i)) * B + b;
          s = i == 0 ? x[at] : s + x[at];
          out[at] = s;
        }
      }
    });
  }
};

// The first maximum of each row: lane l scans i = l, l + 16, ... keeping
// the first best; lanes combine by (NaN first, larger value, lower index),
// which is associative, so the result is the CPU's sequential scan's.
template <class T>
struct MaxRowsKernel {
  static constexpr int kThreads = kRowThreads;
  const T* x;
  T* values;
  int64_t* indices;
  int64_t M, R;

  // Whether (a, ia) wins over (b, ib).
  REPRISE_HD static bool wins(T a, int64_t ia, T b, int64_t ib) {
    const bool an = a != a, bn = b != b;
    if (an != bn) return an;
    if (!an && a != b) return a > b;
    return ia < ib;
  }

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto best = local<T>(ctx);
      auto index = local<int64_t>(ctx);
      ctx.threads([&](int t) {
        const int64_t m = row0 + t / kLanes;
        const int l = t % kLanes;
        index[t] = R;  // loses to any element
        best[t] = T(0);
        if (m >= M) return;
        for (int64_t i = l; i < R; i += kLanes) {
          const T v = x[m * R + i];
          if (index[t] == R || wins(v, i, best[t], index[t])) {
            best[t] = v;
            index[t] = i;
          }
        }
      });
      for (int half = 8; half > 0; half /= 2) {
        const auto ob = ctx.shfl_down(best, half, kLanes);
        const auto oi = ctx.shfl_down(index, half, kLanes);
        ctx.threads([&](int t) {
          if (oi[t] < R && (index[t] == R || wins(ob[t], oi[t], best[t], index[t]))) {
            best[t] = ob[t];
            index[t] = oi[t];
          }
        });
      }
      ctx.threads([&](int t) {
        const int64_t m = row0 + t / kLanes;
        if (m >= M || t % kLanes != 0) return;
        values[m] = best[t];
        indices[m] = index[t];
      });
    });
  }
};

// Sum of x^2 over each 4096-element chunk, in f64, in order: one thread
// per chunk (the CPU's sums, bit for bit).
struct ChunkSquareSumsKernel {
  static constexpr int kThreads = 128;
  static constexpr int64_t kChunk = kSquareSumChunk;
  const float* x;
  double* sums;
  int64_t n, chunks;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t c = ctx.block() * kThreads + t; c < chunks; c += ctx.blocks() * kThreads) {
        double s = 0;
        const int64_t end = (c + 1) * kChunk < n ? (c + 1) * kChunk : n;
        for (int64_t j = c * kChunk; j < end; ++j) s += double(x[j]) * double(x[j]);
        sums[c] = s;
      }
    });
  }
};

template <class Exec>
Tensor sum_middle(const Exec& ex, const Tensor& x_in, int64_t A, int64_t R, int64_t B) {
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty({A * B}, x.dtype(), ex.device());
  if (A * B == 0) return out;
  dispatch_float(x.dtype(), "sum", [&]<class T>() {
    if (B == 1) {
      ex.launch(SumRowsKernel<T>{x.data<T>(), out.data<T>(), A, R}, row_blocks(A));
    } else {
      ex.launch(SumMiddleKernel<T>{x.data<T>(), out.data<T>(), A, R, B}, blocks_for(A * B, 256));
    }
  });
  return out;
}

template <class Exec>
Tensor cumsum_middle(const Exec& ex, const Tensor& x_in, int64_t A, int64_t R, int64_t B,
                     bool reverse) {
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), ex.device());
  if (A * B == 0) return out;
  dispatch_arith(x.dtype(), "cumsum", [&]<class T>() {
    ex.launch(CumsumMiddleKernel<T>{x.data<T>(), out.data<T>(), A, R, B, reverse},
              blocks_for(A * B, 256));
  });
  return out;
}

template <class Exec>
Tensors max_rows(const Exec& ex, const Tensor& x_in) {
  const Tensor x = x_in.contiguous();
  const int64_t R = x.size(-1), M = x.numel() / R;
  Tensor values = Tensor::empty({M}, x.dtype(), ex.device());
  Tensor indices = Tensor::empty({M}, DType::i64, ex.device());
  dispatch_float(x.dtype(), "max", [&]<class T>() {
    ex.launch(MaxRowsKernel<T>{x.data<T>(), values.data<T>(), indices.data<int64_t>(), M, R},
              row_blocks(M));
  });
  return {values, indices};
}

template <class Exec>
Tensor chunk_square_sums(const Exec& ex, const Tensor& x) {
  constexpr int64_t kChunk = ChunkSquareSumsKernel::kChunk;
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  Tensor sums = Tensor::empty({chunks}, DType::f64, ex.device());
  ex.launch(ChunkSquareSumsKernel{x.data<float>(), sums.data<double>(), n, chunks},
            blocks_for(chunks, 128));
  return sums;
}

}  // namespace reprise::cuda
