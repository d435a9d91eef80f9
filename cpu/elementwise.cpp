// Elementwise kernels on the CPU: each applies an engine/functors.h functor
// through cpu/loops.h, so f32 and bf16 run 16 lanes at a time and every
// element is computed the same way at every level.
#include <cmath>
#include <limits>

#include "cpu/backend.h"
#include "cpu/loops.h"
#include "engine/elementwise_dispatch.h"

REPRISE_CPU_BEGIN
namespace {

// Whether this build runs the maps of T itself. The dtypes that go element
// by element (not kLaneMapped: f64, the integer types) run the same code at
// every level, so only the scalar build compiles their maps, and the others
// hand them to it: a third of the compile time of this file per level.
template <class T>
constexpr bool kOwnMap =
#if defined(REPRISE_CPU_LEVEL_SCALAR)
    true;
#else
    kLaneMapped<T>;
#endif

}  // namespace

Tensor CpuBackend::unary(UnaryOp op, double param, const Tensor& x) {
  return dispatch_float(x.dtype(), unary_op_name(op), [&]<class T>() {
    if constexpr (!kOwnMap<T>) {
      return scalar_backend().unary(op, param, x);
    } else {
      return with_unary(op, param, [&](auto f) { return map_new<T, 1>({x}, f); });
    }
  });
}

Tensor CpuBackend::unary_backward(UnaryOp op, double param, const Tensor& saved, const Tensor& g) {
  return dispatch_float(g.dtype(), unary_op_name(op), [&]<class T>() {
    if constexpr (!kOwnMap<T>) {
      return scalar_backend().unary_backward(op, param, saved, g);
    } else {
      return with_unary_grad(op, param, [&](auto f) {
        // The gradient functors take (x, y, dy); the op saved one of x and
        // y, and each functor reads the one it was written for.
        return map_new<T, 2>({g, saved},
                             [f](auto dy, auto v) REPRISE_CPU_LAMBDA { return f(v, v, dy); });
      });
    }
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_arith(out.dtype(), "binary", [&]<class T>() {
    if constexpr (!kOwnMap<T>) {
      scalar_backend().binary(op, out, a, b);
    } else {
      with_binary(op, [&](auto f) {
        map_into<T, 2>(out, {a, b}, f);
        return 0;
      });
    }
  });
}

Tensor CpuBackend::swiglu(const Tensor& gate, const Tensor& up) {
  return dispatch_float_or_bf16(gate.dtype(), "swiglu", [&]<class T>() {
    if constexpr (!kOwnMap<T>) {
      return scalar_backend().swiglu(gate, up);
    } else {
      return map_new<T, 2>({gate, up}, fn::Swiglu{});
    }
  });
}

Tensors CpuBackend::swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy) {
  return dispatch_float_or_bf16(dy.dtype(), "swiglu", [&]<class T>() {
    if constexpr (!kOwnMap<T>) {
      return scalar_backend().swiglu_backward(gate, up, dy);
    } else {
      auto [dgate, dup] =
          map_n_new<T, 2, 3>({dy, gate, up}, [](auto d, auto g, auto u) REPRISE_CPU_LAMBDA {
            return std::array{fn::Swiglu::dgate(g, u, d), fn::Swiglu::dup(g, u, d)};
          });
      return Tensors{dgate, dup};
    }
  });
}

Tensor CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_all(a.dtype(), "where", [&]<class T>() {
    T* po = out.data<T>();
    const bool* pc = static_cast<const bool*>(cond.raw_data());
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    for_each_run<4>(out.shape(), {out.strides(), cond.strides(), a.strides(), b.strides()},
                    [&](auto off, int64_t n, auto st) {
                      T* o = po + off[0];
                      const bool* c = pc + off[1];
                      const T* x = pa + off[2];
                      const T* y = pb + off[3];
                      for (int64_t j = 0; j < n; ++j)
                        o[j * st[0]] = c[j * st[1]] ? x[j * st[2]] : y[j * st[3]];
                    });
  });
  return out;
}

Tensor CpuBackend::compare(CompareOp op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), DType::boolean);
  bool* po = out.data<bool>();
  dispatch_all(a.dtype(), compare_op_name(op), [&]<class T>() {
    with_compare(op, [&](auto f) {
      const T* pa = static_cast<const T*>(a.raw_data());
      const T* pb = static_cast<const T*>(b.raw_data());
      for_each_run<3>(out.shape(), {out.strides(), a.strides(), b.strides()},
                      [&](auto off, int64_t n, auto st) {
                        bool* o = po + off[0];
                        const T* x = pa + off[1];
                        const T* y = pb + off[2];
                        for (int64_t j = 0; j < n; ++j)
                          o[j * st[0]] = f(x[j * st[1]], y[j * st[2]]);
                      });
      return 0;
    });
  });
  return out;
}

Tensor CpuBackend::perturb_ulps(const Tensor& t, int k, uint64_t seed) {
  Tensor out = t.clone();  // contiguous
  dispatch_any_float(out.dtype(), "perturb_ulps", [&]<class F>() {
    F* p = out.data<F>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (!fn::is_finite(p[i])) continue;
      const int64_t d = int64_t(fn::splitmix64(seed + uint64_t(i)) % uint64_t(2 * k + 1)) - k;
      const F moved = fn::step_ulps(p[i], d);
      if (fn::is_finite(moved)) p[i] = moved;
    }
  });
  return out;
}

REPRISE_CPU_END
