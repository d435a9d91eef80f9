#pragma once
// Elementwise kernels: each applies an engine/functors.h functor, the same
// definition the CPU backend runs, so an element comes out with the CPU's
// bits wherever the math is made of IEEE operations and the functors' own
// polynomials (f32 exp, tanh, log, sin, cos, erf, ...; pow and the f64
// functions are each library's own and may differ in the last place).
// Operands may have any strides; outputs the kernels allocate are contiguous.

#include <cmath>
#include <limits>
#include <type_traits>

#include "cuda/kernel.h"
#include "cuda/kernels/strided.h"
#include "engine/backend.h"
#include "engine/elementwise_dispatch.h"
#include "engine/functors.h"
#include "engine/tensor.h"

namespace reprise::cuda {

// out = f(in[0], ..., in[N-1]) elementwise; layout: out's strides, then the
// inputs'. Out is T but for a comparison (bool).
template <class T, int N, class F, class Out = T>
struct MapKernel {
  static constexpr int kThreads = 256;
  Out* out;
  const T* in[N];
  Strided<N + 1> layout;
  int64_t n;
  F f;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        int64_t off[N + 1];
        layout.offsets(i, off);
        if constexpr (N == 1) {
          out[off[0]] = f(in[0][off[1]]);
        } else if constexpr (N == 2) {
          out[off[0]] = f(in[0][off[1]], in[1][off[2]]);
        } else {
          out[off[0]] = f(in[0][off[1]], in[1][off[2]], in[2][off[3]]);
        }
      });
    });
  }
};

// A gradient functor (x, y, dy) -> dx over (dy, saved), where saved is the
// one of x and y its op keeps (cpu/elementwise.cpp does the same).
template <class G>
struct GradOfSaved {
  G g;
  template <class T>
  REPRISE_HD T operator()(T dy, T saved) const {
    return g(saved, saved, dy);
  }
};
struct SwigluDgate {
  template <class T>
  REPRISE_HD T operator()(T dy, T gate, T up) const {
    return fn::Swiglu::dgate(gate, up, dy);
  }
};
struct SwigluDup {
  template <class T>
  REPRISE_HD T operator()(T dy, T gate, T up) const {
    return fn::Swiglu::dup(gate, up, dy);
  }
};

// f on 16-bit operands: each value widened to f32 (exactly), f computed in
// f32, the result rounded once to the operands' type (the CPU's loops do
// the same).
template <class F>
struct InF32 {
  F f;
  template <class T, class... Ts>
  REPRISE_HD T operator()(T x, Ts... xs) const {
    return T(f(float(x), float(xs)...));
  }
};

// f as it applies to stored T: itself, or in f32 for bf16.
template <class T, class F>
auto on_storage(F f) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return InF32<F>{f};
  } else {
    return f;
  }
}

// out = f(ins...) for tensors of out's shape.
template <class T, int N, class F, class Exec, class Out = T>
void map_into(const Exec& ex, const Tensor& out, const std::array<Tensor, N>& ins, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  std::array<Shape, N + 1> strides;
  strides[0] = out.strides();
  MapKernel<T, N, F, Out> k{.out = static_cast<Out*>(out.raw_data()), .n = n, .f = f};
  for (int i = 0; i < N; ++i) {
    strides[size_t(i + 1)] = ins[size_t(i)].strides();
    k.in[i] = static_cast<const T*>(ins[size_t(i)].raw_data());
  }
  k.layout = strided<N + 1>(out.shape(), strides);
  ex.launch(k, blocks_for(n, MapKernel<T, N, F, Out>::kThreads));
}

template <class T, int N, class F, class Exec>
Tensor map_new(const Exec& ex, const std::array<Tensor, N>& ins, F f) {
  Tensor out = Tensor::empty(ins[0].shape(), ins[0].dtype(), ex.device());
  map_into<T, N>(ex, out, ins, f);
  return out;
}

template <class Exec>
Tensor unary(const Exec& ex, UnaryOp op, double param, const Tensor& x) {
  return dispatch_float(x.dtype(), unary_op_name(op), [&]<class T>() {
    return with_unary(op, param, [&](auto f) { return map_new<T, 1>(ex, {x}, f); });
  });
}

template <class Exec>
Tensor unary_backward(const Exec& ex, UnaryOp op, double param, const Tensor& saved,
                      const Tensor& g) {
  return dispatch_float(g.dtype(), unary_op_name(op), [&]<class T>() {
    return with_unary_grad(op, param, [&](auto f) {
      return map_new<T, 2>(ex, {g, saved}, GradOfSaved<decltype(f)>{f});
    });
  });
}

template <class Exec>
void binary(const Exec& ex, BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_arith(out.dtype(), "binary", [&]<class T>() {
    with_binary(op, [&](auto f) {
      map_into<T, 2>(ex, out, {a, b}, f);
      return 0;
    });
  });
}

template <class Exec>
Tensor swiglu(const Exec& ex, const Tensor& gate, const Tensor& up) {
  return dispatch_float_or_bf16(gate.dtype(), "swiglu", [&]<class T>() {
    return map_new<T, 2>(ex, {gate, up}, on_storage<T>(fn::Swiglu{}));
  });
}

template <class Exec>
Tensors swiglu_backward(const Exec& ex, const Tensor& gate, const Tensor& up, const Tensor& dy) {
  return dispatch_float_or_bf16(dy.dtype(), "swiglu", [&]<class T>() {
    return Tensors{map_new<T, 3>(ex, {dy, gate, up}, on_storage<T>(SwigluDgate{})),
                   map_new<T, 3>(ex, {dy, gate, up}, on_storage<T>(SwigluDup{}))};
  });
}

template <class T>
struct WhereKernel {
  static constexpr int kThreads = 256;
  T* out;
  const bool* cond;
  const T* a;
  const T* b;
  Strided<4> layout;
  int64_t n;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        int64_t off[4];
        layout.offsets(i, off);
        out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
      });
    });
  }
};

template <class Exec>
Tensor where(const Exec& ex, const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), ex.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  const Strided<4> layout =
      strided<4>(out.shape(), {out.strides(), cond.strides(), a.strides(), b.strides()});
  dispatch_all(a.dtype(), "where", [&]<class T>() {
    ex.launch(WhereKernel<T>{.out = out.data<T>(),
                             .cond = static_cast<const bool*>(cond.raw_data()),
                             .a = static_cast<const T*>(a.raw_data()),
                             .b = static_cast<const T*>(b.raw_data()),
                             .layout = layout,
                             .n = n},
              blocks_for(n, 256));
  });
  return out;
}

template <class Exec>
Tensor compare(const Exec& ex, CompareOp op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), DType::boolean, ex.device());
  dispatch_all(a.dtype(), compare_op_name(op), [&]<class T>() {
    with_compare(op, [&](auto f) {
      map_into<T, 2, decltype(f), Exec, bool>(ex, out, {a, b}, f);
      return 0;
    });
  });
  return out;
}

// Finite element i of a contiguous tensor moved by splitmix64(seed + i) %
// (2k + 1) - k ulps, unless that leaves the finite range (cpu/elementwise.cpp).
template <class F>
struct PerturbKernel {
  static constexpr int kThreads = 256;
  F* x;
  int64_t n;
  int k;
  uint64_t seed;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, n, [&](int64_t i) {
        const F v = x[i];
        if (!fn::is_finite(v)) return;
        const int64_t d = int64_t(fn::splitmix64(seed + uint64_t(i)) % uint64_t(2 * k + 1)) - k;
        const F moved = fn::step_ulps(v, d);
        if (fn::is_finite(moved)) x[i] = moved;
      });
    });
  }
};

template <class Exec>
Tensor perturb_ulps(const Exec& ex, const Tensor& t, int k, uint64_t seed) {
  Tensor out = t.clone();  // contiguous
  dispatch_any_float(out.dtype(), "perturb_ulps", [&]<class F>() {
    ex.launch(PerturbKernel<F>{.x = out.data<F>(), .n = out.numel(), .k = k, .seed = seed},
              blocks_for(out.numel(), 256));
  });
  return out;
}

}  // namespace reprise::cuda
