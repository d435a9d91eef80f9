#pragma once
// The math of each elementwise op, written once as REPRISE_HD functors so
// that the CPU loops (ops/elementwise.h) and CUDA kernels share it.
// Forward functors map x -> y; gradient functors map (x, y, dy) -> dx, and
// each reads only what its op saves.

#include <cmath>
#include <type_traits>

#include "engine/hd.h"
#include "ops/row_math.h"

namespace reprise::ops::fn {

// e^x for the functors below: on the host, f32 takes ops::detail::exp_f32
// (within 1.02 ulp; it vectorises, where libm's expf is a call per element
// and held silu at a sixth of PyTorch's speed). f64 keeps std::exp, so
// gradcheck sees the exact formula; device code keeps CUDA's expf.
template <class T>
REPRISE_HD T exp_of(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    return detail::exp_f32(x);
  } else {
    return std::exp(x);
  }
#else
  return std::exp(x);
#endif
}

struct Neg {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return -x;
  }
};
struct Exp {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return std::exp(x);
  }
};
struct Log {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return std::log(x);
  }
};
struct Sqrt {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct Rsqrt {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};
struct Relu {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x > T(0) ? x : T(0);
  }
};
struct Sigmoid {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return T(1) / (T(1) + exp_of(-x));
  }
};
struct Tanh {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return std::tanh(x);
  }
};
// x * sigmoid(x)
struct Silu {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x / (T(1) + exp_of(-x));
  }
};
// GELU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x sigmoid(2 u), the same function: 0.5 (1 + tanh(u)) =
// 1 / (1 + e^(-2u)). It needs one exp instead of a tanh, and for x < 0 it
// avoids the cancellation in 1 + tanh(u).
struct GeluTanh {
  static constexpr double kAlpha = 0.7978845608028654;  // sqrt(2 / pi)
  static constexpr double kBeta = 0.044715;
  template <class T>
  REPRISE_HD static T inner(T x) {  // u
    return T(kAlpha) * (x + T(kBeta) * x * x * x);
  }
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x / (T(1) + exp_of(T(-2) * inner(x)));
  }
};
struct PowScalar {
  double exponent;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    if (exponent == 2.0) return x * x;
    return std::pow(x, T(exponent));
  }
};

// ---- gradients: (x, y, dy) -> dx -------------------------------------------

struct NegGrad {
  template <class T>
  REPRISE_HD T operator()(T, T, T g) const {
    return -g;
  }
};
struct ExpGrad {  // d exp = y
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return g * y;
  }
};
struct LogGrad {
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return g / x;
  }
};
struct SqrtGrad {  // 1 / (2 y)
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return g / (T(2) * y);
  }
};
struct RsqrtGrad {  // -y^3 / 2
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return T(-0.5) * g * y * y * y;
  }
};
struct ReluGrad {
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return x > T(0) ? g : T(0);
  }
};
struct SigmoidGrad {  // y (1 - y)
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return g * y * (T(1) - y);
  }
};
struct TanhGrad {  // 1 - y^2
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return g * (T(1) - y * y);
  }
};
struct SiluGrad {  // s (1 + x (1 - s)), s = sigmoid(x)
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    T s = T(1) / (T(1) + exp_of(-x));
    return g * s * (T(1) + x * (T(1) - s));
  }
};
// With s = sigmoid(2 u) = 0.5 (1 + tanh(u)): 1 - tanh(u)^2 = 4 s (1 - s), so
// d/dx 0.5 x (1 + tanh(u)) = s + 2 x s (1 - s) du/dx.
struct GeluTanhGrad {
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    T alpha = T(GeluTanh::kAlpha), beta = T(GeluTanh::kBeta);
    T s = T(1) / (T(1) + exp_of(T(-2) * GeluTanh::inner(x)));
    T d_inner = alpha * (T(1) + T(3) * beta * x * x);
    return g * (s + T(2) * x * s * (T(1) - s) * d_inner);
  }
};
struct PowScalarGrad {  // e x^(e-1)
  double exponent;
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    if (exponent == 2.0) return g * T(2) * x;
    return g * T(exponent) * std::pow(x, T(exponent - 1.0));
  }
};

// ---- binary ---------------------------------------------------------------

struct Add {
  template <class T>
  REPRISE_HD T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <class T>
  REPRISE_HD T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <class T>
  REPRISE_HD T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <class T>
  REPRISE_HD T operator()(T a, T b) const {
    return a / b;
  }
};

}  // namespace reprise::ops::fn
