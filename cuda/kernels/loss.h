#pragma once
// cross_entropy, as cpu/loss.cpp computes it: per row n of logits (N, C)
// its logsumexp lse[n] and loss lse[n] - logits[n, target], summed in row
// order in f64; the gradient rebuilt from the saved logsumexp,
//   dlogits[n, c] = exp(logits[n, c] - lse[n]) scale - [c == target] scale,
// 0 on ignored rows; and the count of rows that count. bf16 logits (S)
// compute in f32 (T), their gradient rounded once.

#include <cmath>

#include "cuda/kernels/rows.h"
#include "engine/backend.h"
#include "engine/tensor.h"

namespace reprise::cuda {

// Per row: lse (0 on ignored rows) and the row's loss in f64 (0 there).
template <class S, class T = ComputeType<S>>
struct CrossEntropyKernel {
  static constexpr int kThreads = kRowThreads;
  const S* x;
  const int64_t* target;
  T* lse;
  double* row_loss;
  int64_t N, C, ignore;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    for_row_groups(ctx, N, [&](int64_t row0) {
      auto counted = [&](int t) {
        const int64_t n = row0 + t / kLanes;
        return n < N && target[n] != ignore;
      };
      auto row = [&](int t) { return x + (row0 + t / kLanes) * C; };
      const auto m = row_max<T>(ctx, C, counted, row);
      const auto sum = row_sum<T>(
          ctx, C, counted, [&](int t, int64_t i) { return fn::exp_of(T(row(t)[i]) - m[t]); });
      ctx.threads([&](int t) {
        const int64_t n = row0 + t / kLanes;
        if (t % kLanes != 0 || n >= N) return;
        if (!counted(t)) {
          lse[n] = T(0);  // never read: the row has no gradient
          row_loss[n] = 0;
          return;
        }
        const T v = m[t] + std::log(sum[t]);
        lse[n] = v;
        row_loss[n] = double(v - T(row(t)[target[n]]));
      });
    });
  }
};

// out[0] = the sum of v[0, n) in order (the CPU's order; one thread).
struct SumInOrderKernel {
  static constexpr int kThreads = 32;
  const double* v;
  double* out;
  int64_t n;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      if (t != 0) return;
      double total = 0;
      for (int64_t i = 0; i < n; ++i) total += v[i];
      *out = total;
    });
  }
};

template <class S, class T = ComputeType<S>>
struct CrossEntropyBackwardKernel {
  static constexpr int kThreads = 256;
  const S* x;
  const int64_t* target;
  const T* lse;
  S* dx;
  int64_t N, C, ignore;
  double scale;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      for (int64_t i = ctx.block() * kThreads + t; i < N * C; i += ctx.blocks() * kThreads) {
        const int64_t n = i / C, c = i % C;
        if (target[n] == ignore) {
          dx[i] = S(T(0));
          continue;
        }
        T d = fn::exp_of(T(x[i]) - lse[n]) * T(scale);
        if (c == target[n]) d = d - T(scale);
        dx[i] = S(d);
      }
    });
  }
};

// out[0] = the first row whose target is neither in [0, classes) nor
// ignore (-1 if none), out[1] = how many rows before it count.
struct CountTargetsKernel {
  static constexpr int kThreads = 1024;
  const int64_t* target;
  int64_t* out;
  int64_t N, classes, ignore;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    int64_t* scratch = reinterpret_cast<int64_t*>(ctx.shared());
    auto first_bad = local<int64_t>(ctx);
    ctx.threads([&](int t) {
      first_bad[t] = N;
      for (int64_t n = t; n < N; n += kThreads) {
        const int64_t v = target[n];
        if (v != ignore && (v < 0 || v >= classes) && n < first_bad[t]) first_bad[t] = n;
      }
    });
    block_reduce(ctx, first_bad, scratch, [](int64_t a, int64_t b) { return a < b ? a : b; });
    auto count = local<int64_t>(ctx);
    ctx.threads([&](int t) {
      count[t] = 0;
      for (int64_t n = t; n < first_bad[t]; n += kThreads) count[t] += target[n] != ignore;
    });
    block_reduce(ctx, count, scratch, [](int64_t a, int64_t b) { return a + b; });
    ctx.threads([&](int t) {
      if (t != 0) return;
      out[0] = first_bad[t] == N ? -1 : first_bad[t];
      out[1] = count[t];
    });
  }
};

template <class Exec>
TargetCount count_targets(const Exec& ex, const Tensor& targets_in, int64_t classes,
                          int64_t ignore_index) {
  const Tensor targets = targets_in.contiguous();
  const Tensor out = Tensor::empty({2}, DType::i64, ex.device());
  ex.launch(CountTargetsKernel{targets.data<int64_t>(), out.data<int64_t>(), targets.numel(),
                               classes, ignore_index},
            1, 32 * sizeof(int64_t));
  int64_t host[2];
  ex.download(host, out.raw_data(), sizeof host);
  return TargetCount{.count = host[1], .first_bad_row = host[0]};
}

template <class Exec>
Tensors cross_entropy(const Exec& ex, const Tensor& logits_in, const Tensor& targets_in,
                      int64_t ignore_index) {
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor lse = Tensor::empty({N}, compute_dtype(logits.dtype()), ex.device());
  const Tensor row_loss = Tensor::empty({N}, DType::f64, ex.device());
  Tensor total = Tensor::empty({}, DType::f64, ex.device());
  dispatch_float_or_bf16(logits.dtype(), "cross_entropy", [&]<class S>() {
    using T = ComputeType<S>;
    ex.launch(CrossEntropyKernel<S>{logits.data<S>(), targets.data<int64_t>(), lse.data<T>(),
                                    row_loss.data<double>(), N, C, ignore_index},
              row_blocks(N));
  });
  ex.launch(SumInOrderKernel{row_loss.data<double>(), total.data<double>(), N}, 1);
  return {total, lse};
}

template <class Exec>
Tensor cross_entropy_backward(const Exec& ex, const Tensor& logits_in, const Tensor& targets_in,
                              const Tensor& lse_in, const Tensor& g, double divisor,
                              int64_t ignore_index) {
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const Tensor lse = lse_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  const double scale = divisor > 0 ? g.item<double>() / divisor : 0.0;
  Tensor dx = Tensor::empty(logits.shape(), logits.dtype(), ex.device());
  dispatch_float_or_bf16(logits.dtype(), "cross_entropy", [&]<class S>() {
    using T = ComputeType<S>;
    ex.launch(CrossEntropyBackwardKernel<S>{logits.data<S>(), targets.data<int64_t>(),
                                            lse.data<T>(), dx.data<S>(), N, C, ignore_index, scale},
              blocks_for(N * C, 256));
  });
  return dx;
}

}  // namespace reprise::cuda
