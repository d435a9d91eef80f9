#pragma once
// The math of each elementwise op, written once as REPRISE_HD functors so
// that the CPU loops (ops/elementwise.h) and CUDA kernels share it.
// Forward functors map x -> y; gradient functors map (x, y, dy) -> dx, and
// each reads only what its op saves.

#include <cmath>

#include "engine/hd.h"

namespace reprise::ops::fn {

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
    return T(1) / (T(1) + std::exp(-x));
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
    return x / (T(1) + std::exp(-x));
  }
};
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
struct GeluTanh {
  static constexpr double kAlpha = 0.7978845608028654;  // sqrt(2 / pi)
  static constexpr double kBeta = 0.044715;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    T inner = T(kAlpha) * (x + T(kBeta) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
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
    T s = T(1) / (T(1) + std::exp(-x));
    return g * s * (T(1) + x * (T(1) - s));
  }
};
struct GeluTanhGrad {
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    T alpha = T(GeluTanh::kAlpha), beta = T(GeluTanh::kBeta);
    T inner = alpha * (x + beta * x * x * x);
    T t = std::tanh(inner);
    T d_inner = alpha * (T(1) + T(3) * beta * x * x);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * d_inner);
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
