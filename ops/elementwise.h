#pragma once
// CPU loops that apply an ops::fn functor elementwise. Outputs are new
// contiguous tensors; inputs may have any strides (views, broadcasts).

#include "engine/strided_loop.h"
#include "engine/tensor.h"

namespace reprise::ops::detail {

// Raises unless the tensors share dtype and device (names op and both).
void check_same_dtype_device(const char* op, const Tensor& a, const Tensor& b);
// Raises unless t is a floating tensor (f32 or f64) on the cpu.
void check_float_cpu(const char* op, const Tensor& t);

// y = f(x), y shaped like x. f32/f64.
template <class F>
Tensor map(const char* op, const Tensor& x, F f) {
  check_float_cpu(op, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    T* out = y.data<T>();
    const T* in = x.data<T>();
    for_each_run<2>(x.shape(), {y.strides(), x.strides()}, [&](auto off, int64_t n, auto st) {
      T* o = out + off[0];
      const T* i = in + off[1];
      if (st[1] == 1) {
        for (int64_t j = 0; j < n; ++j) o[j] = f(i[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) o[j] = f(i[j * st[1]]);
      }
    });
  });
  return y;
}

// out = f(a, b) with numpy broadcasting. f32, f64, i32, i64.
template <class F>
Tensor map2(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_same_dtype_device(op, a, b);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, a.dtype());
  NoGradGuard no_grad;  // expand is plumbing here
  Tensor ea = a.expand(shape), eb = b.expand(shape);
  dispatch_arith(a.dtype(), op, [&]<class T>() {
    T* o = out.data<T>();
    const T* x = ea.data<T>();
    const T* y = eb.data<T>();
    for_each_run<3>(shape, {out.strides(), ea.strides(), eb.strides()},
                    [&](auto off, int64_t n, auto st) {
                      T* po = o + off[0];
                      const T* px = x + off[1];
                      const T* py = y + off[2];
                      if (st[1] == 1 && st[2] == 1) {
                        for (int64_t j = 0; j < n; ++j) po[j] = f(px[j], py[j]);
                      } else if (st[1] == 1 && st[2] == 0) {
                        const T s = *py;
                        for (int64_t j = 0; j < n; ++j) po[j] = f(px[j], s);
                      } else {
                        for (int64_t j = 0; j < n; ++j) po[j] = f(px[j * st[1]], py[j * st[2]]);
                      }
                    });
  });
  return out;
}

// out = f(x, y, g) for three same-shape float tensors (a gradient rule).
template <class F>
Tensor map3(const char* op, const Tensor& x, const Tensor& y, const Tensor& g, F f) {
  check_float_cpu(op, g);
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  dispatch_float(g.dtype(), op, [&]<class T>() {
    T* o = out.data<T>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    const T* pg = g.data<T>();
    for_each_run<4>(g.shape(), {out.strides(), x.strides(), y.strides(), g.strides()},
                    [&](auto off, int64_t n, auto st) {
                      T* po = o + off[0];
                      const T* a = px + off[1];
                      const T* b = py + off[2];
                      const T* c = pg + off[3];
                      if (st[1] == 1 && st[2] == 1 && st[3] == 1) {
                        for (int64_t j = 0; j < n; ++j) po[j] = f(a[j], b[j], c[j]);
                      } else {
                        for (int64_t j = 0; j < n; ++j)
                          po[j] = f(a[j * st[1]], b[j * st[2]], c[j * st[3]]);
                      }
                    });
  });
  return out;
}

}  // namespace reprise::ops::detail
