#pragma once
// softmax and log_softmax over contiguous rows (M, R), and their gradients
// from the saved output y, as cpu/softmax.cpp computes them:
//   softmax:     y = e / sum(e), e = exp(x - max);  dx = y * (g - sum(g * y))
//   log_softmax: y = x - (max + log sum(e));        dx = g - exp(y) * sum(g)

#include <cmath>

#include "cuda/kernels/rows.h"
#include "engine/backend.h"
#include "engine/tensor.h"

namespace reprise::cuda {

template <class T>
struct SoftmaxKernel {
  static constexpr int kThreads = kRowThreads;
  const T* x;
  T* y;
  int64_t M, R;
  bool log;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < M; };
      auto at = [&](int t) { return (row0 + t / kLanes) * R; };
      const auto mx = row_max<T>(ctx, R, active, [&](int t) { return x + at(t); });
      const auto sum = row_sum<T>(ctx, R, active, [&](int t, int64_t i) {
        const T e = fn::exp_of(x[at(t) + i] - mx[t]);
        if (!log) y[at(t) + i] = e;
        return e;
      });
      ctx.threads([&](int t) {
        if (!active(t)) return;
        if (log) {
          const T shift = mx[t] + std::log(sum[t]);
          for (int64_t i = t % kLanes; i < R; i += kLanes) y[at(t) + i] = x[at(t) + i] - shift;
        } else {
          const T inv = T(1) / sum[t];
          for (int64_t i = t % kLanes; i < R; i += kLanes) y[at(t) + i] *= inv;
        }
      });
    });
  }
};

template <class T>
struct SoftmaxBackwardKernel {
  static constexpr int kThreads = kRowThreads;
  const T* y;
  const T* g;
  T* dx;
  int64_t M, R;
  bool log;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, M, [&](int64_t row0) {
      auto active = [&](int t) { return row0 + t / kLanes < M; };
      auto at = [&](int t) { return (row0 + t / kLanes) * R; };
      const auto s = row_sum<T>(ctx, R, active, [&](int t, int64_t i) {
        return log ? g[at(t) + i] : g[at(t) + i] * y[at(t) + i];
      });
      ctx.threads([&](int t) {
        if (!active(t)) return;
        for (int64_t i = t % kLanes; i < R; i += kLanes) {
          const int64_t j = at(t) + i;
          dx[j] = log ? g[j] - fn::exp_of(y[j]) * s[t] : y[j] * (g[j] - s[t]);
        }
      });
    });
  }
};

template <class Exec>
Tensor softmax(const Exec& ex, SoftmaxKind kind, const Tensor& x_in) {
  const Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), ex.device());
  const int64_t R = x.dim() == 0 ? 1 : x.size(-1), M = R == 0 ? 0 : x.numel() / R;
  dispatch_float(x.dtype(), "softmax", [&]<class T>() {
    ex.launch(SoftmaxKernel<T>{x.data<T>(), y.data<T>(), M, R, kind == SoftmaxKind::log_softmax},
              row_blocks(M));
  });
  return y;
}

template <class Exec>
Tensor softmax_backward(const Exec& ex, SoftmaxKind kind, const Tensor& y_in, const Tensor& g_in) {
  const Tensor y = y_in.contiguous(), g = g_in.contiguous();
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), ex.device());
  const int64_t R = y.dim() == 0 ? 1 : y.size(-1), M = R == 0 ? 0 : y.numel() / R;
  dispatch_float(y.dtype(), "softmax", [&]<class T>() {
    ex.launch(SoftmaxBackwardKernel<T>{y.data<T>(), g.data<T>(), dx.data<T>(), M, R,
                                       kind == SoftmaxKind::log_softmax},
              row_blocks(M));
  });
  return dx;
}

}  // namespace reprise::cuda
