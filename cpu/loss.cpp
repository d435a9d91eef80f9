// cross_entropy on the CPU: one pass per row for its logsumexp and loss,
// and the gradient rebuilt from the saved logits and logsumexp:
//   dlogits[n, c] = scale * (exp(logits[n, c] - lse[n]) - [c == targets[n]])
// N = rows, C = classes. bf16 logits are read widened and computed in f32
// (lse f32); their gradient rounds once to bf16.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/backend.h"
#include "cpu/rows.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN

TargetCount CpuBackend::count_targets(const Tensor& targets, int64_t classes,
                                      int64_t ignore_index) {
  const Tensor t = targets.contiguous();
  const int64_t* p = t.data<int64_t>();
  TargetCount c{0, -1};
  for (int64_t n = 0; n < t.numel(); ++n) {
    if (p[n] == ignore_index) continue;
    if (p[n] < 0 || p[n] >= classes) {
      c.first_bad_row = n;
      break;
    }
    ++c.count;
  }
  return c;
}

Tensors CpuBackend::cross_entropy(const Tensor& logits_in, const Tensor& targets_in,
                                  int64_t ignore_index) {
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  const int64_t* t = targets.data<int64_t>();
  Tensor lse = Tensor::empty({N}, compute_dtype(logits.dtype()));
  // Row losses are summed afterwards in row order, in double, so the total
  // does not depend on how rows were split across threads.
  std::vector<double> row_loss(size_t(N), 0.0);
  dispatch_float_or_bf16(logits.dtype(), "cross_entropy", [&]<class S>() {
    using T = ComputeType<S>;
    const S* x = logits.data<S>();
    T* l = lse.data<T>();
    threads::parallel_for(N, row_grain(C), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        if (t[n] == ignore_index) {
          l[n] = T(0);  // never read: the row has no gradient
          continue;
        }
        const S* xr = x + n * C;
        const T m = row_max(xr, C);
        const V16<T> mv = V16<T>::splat(m);
        const T sum = row_sum<T>(
            C, [&](int64_t i, int64_t valid) { return exp_of(load_lanes(xr + i, valid) - mv); });
        const T v = m + std::log(sum);
        l[n] = v;
        row_loss[size_t(n)] = double(v - T(xr[t[n]]));
      }
    });
  });
  double total = 0;
  for (double v : row_loss) total += v;
  return {Tensor::scalar(total, DType::f64), lse};
}

Tensor CpuBackend::cross_entropy_backward(const Tensor& logits_in, const Tensor& targets_in,
                                          const Tensor& lse_in, const Tensor& g, double divisor,
                                          int64_t ignore_index) {
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const Tensor lse = lse_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  const int64_t* t = targets.data<int64_t>();
  const double scale = divisor > 0 ? g.item<double>() / divisor : 0.0;
  Tensor dx = Tensor::empty(logits.shape(), logits.dtype());
  dispatch_float_or_bf16(logits.dtype(), "cross_entropy", [&]<class S>() {
    using T = ComputeType<S>;
    const S* x = logits.data<S>();
    const T* l = lse.data<T>();
    S* d = dx.data<S>();
    const V16<T> s = V16<T>::splat(scale);
    threads::parallel_for(N, row_grain(C), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        S* dr = d + n * C;
        if (t[n] == ignore_index) {
          std::fill_n(dr, C, S(0));
          continue;
        }
        const S* xr = x + n * C;
        const V16<T> lr = V16<T>::splat(l[n]);
        row_steps(C, [&](int64_t i, int64_t valid) {
          V16<T> v = exp_of(load_lanes(xr + i, valid) - lr) * s;
          if (const int64_t j = t[n] - i; j >= 0 && j < valid) {
            // The target's term, in T before any rounding to S.
            T lanes[16];
            v.store(lanes);
            lanes[j] -= T(scale);
            v = V16<T>::load(lanes);
          }
          store_lanes(dr + i, v, valid);
        });
      }
    });
  });
  return dx;
}

REPRISE_CPU_END
