// softmax and log_softmax over contiguous rows (M, R), and their gradients
// from the saved output y:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
#include <cmath>

#include "cpu/backend.h"
#include "cpu/rows.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

template <class T>
void forward_rows(SoftmaxKind kind, const T* x, T* y, int64_t M, int64_t R) {
  threads::parallel_for(M, row_grain(R), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const T* xr = x + m * R;
      T* yr = y + m * R;
      const V16<T> mx = V16<T>::splat(row_max(xr, R));
      if (kind == SoftmaxKind::softmax) {
        const T sum = row_sum<T>(R, [&](int64_t i, int64_t valid) {
          const V16<T> e = exp_of(row_load(xr, i, valid) - mx);
          row_store(yr, i, valid, e);
          return e;
        });
        const T inv = T(1) / sum;
        for (int64_t r = 0; r < R; ++r) yr[r] *= inv;
      } else {
        const T sum = row_sum<T>(
            R, [&](int64_t i, int64_t valid) { return exp_of(row_load(xr, i, valid) - mx); });
        const T shift = mx.lane(0) + std::log(sum);
        for (int64_t r = 0; r < R; ++r) yr[r] = xr[r] - shift;
      }
    }
  });
}

template <class T>
void backward_rows(SoftmaxKind kind, const T* y, const T* g, T* dx, int64_t M, int64_t R) {
  threads::parallel_for(M, row_grain(R), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const T* yr = y + m * R;
      const T* gr = g + m * R;
      T* dr = dx + m * R;
      if (kind == SoftmaxKind::softmax) {
        const T dot = row_sum<T>(R, [&](int64_t i, int64_t valid) {
          return row_load(gr, i, valid) * row_load(yr, i, valid);
        });
        for (int64_t r = 0; r < R; ++r) dr[r] = yr[r] * (gr[r] - dot);
      } else {
        const V16<T> sum = V16<T>::splat(
            row_sum<T>(R, [&](int64_t i, int64_t valid) { return row_load(gr, i, valid); }));
        row_steps(R, [&](int64_t i, int64_t valid) {
          row_store(dr, i, valid, row_load(gr, i, valid) - exp_of(row_load(yr, i, valid)) * sum);
        });
      }
    }
  });
}

}  // namespace

Tensor CpuBackend::softmax(SoftmaxKind kind, const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const int64_t R = x.size(-1), M = R == 0 ? 0 : x.numel() / R;
  dispatch_float(x.dtype(), "softmax",
                 [&]<class T>() { forward_rows(kind, x.data<T>(), y.data<T>(), M, R); });
  return y;
}

Tensor CpuBackend::softmax_backward(SoftmaxKind kind, const Tensor& y, const Tensor& g) {
  Tensor dx = Tensor::empty(y.shape(), y.dtype());
  const int64_t R = y.size(-1), M = R == 0 ? 0 : y.numel() / R;
  dispatch_float(y.dtype(), "softmax", [&]<class T>() {
    backward_rows(kind, y.data<T>(), g.data<T>(), dx.data<T>(), M, R);
  });
  return dx;
}

REPRISE_CPU_END
