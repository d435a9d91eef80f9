#pragma once
// The math of each elementwise op, written once as REPRISE_HD functors that
// the CPU kernels (cpu/, on scalars and on cpu/vec.h's 16-lane vectors) and
// the CUDA kernels share, so every backend and every CPU capability computes
// an element with the same sequence of roundings.
//
// A functor is a template over its value type T: float, double, or a vector
// of either. It uses only +, -, *, /, comparisons, and the helpers below
// (lit, select, vmin, vmax, exp_of, ...), which a vector type provides as
// overloads that argument-dependent lookup finds. Nothing here may be
// contracted into a fused multiply-add by the compiler (reprise builds with
// -ffp-contract=off; CUDA with --fmad=false): a fusion would change the bits
// on one target and not on another.
//
// The CPU backend compiles this file once per ISA level (cpu/vec.h), so it
// includes nothing beyond what cpu/vec.h includes first, and every function
// here is REPRISE_HD (always inlined).
//
// Forward functors map x -> y; gradient functors map (x, y, dy) -> dx, and
// each reads only what its op saves.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "base/hd.h"
#include "engine/elementwise_ops.h"
#include "engine/half.h"

namespace reprise::fn {

// The constant v in T (a vector type broadcasts it: T::splat).
template <class T>
REPRISE_HD T lit(double v) {
  if constexpr (requires { T::splat(v); }) {
    return T::splat(v);
  } else {
    return T(v);
  }
}

template <class T>
REPRISE_HD T select(bool c, T a, T b) {
  return c ? a : b;
}
// a < b ? a : b and a > b ? a : b, as SSE's MINPS/MAXPS order them: the
// second operand when either is NaN.
template <class T>
REPRISE_HD T vmin(T a, T b) {
  return select(a < b, a, b);
}
template <class T>
REPRISE_HD T vmax(T a, T b) {
  return select(a > b, a, b);
}

// a * b + c rounded once. Functors fuse only here, explicitly, so every
// target rounds the same way (a vector type's overload uses its FMA
// instructions; a target without them, the C library's fma).
REPRISE_HD float fma_of(float a, float b, float c) { return std::fma(a, b, c); }
REPRISE_HD double fma_of(double a, double b, double c) { return std::fma(a, b, c); }

// exp_poly's round-to-integer constant, 1.5 * 2^23: for |v| < 2^22,
// v + kShifter rounds v to an integer n and holds it in its low mantissa
// bits, kShifter's bit pattern plus n.
inline constexpr float kShifter = 12582912.0f;

// p * 2^n, rounded once, where t = kShifter + n for an integral n in
// [-252, 254]: two factors, each a normal power of two, so that p * 2^(n/2)
// is exact and results down to 2^-149, the subnormals, come out right. The
// factors are built from t's bits, not by converting n to an integer, so a
// NaN t (from a NaN x) is well defined here: p is NaN then, and so is the
// product. kShifter's bits are 0x4B400000, whose low nine bits are zero, so
// they vanish from each factor's exponent field after the shift by 23.
REPRISE_HD float scale2(float p, float t) {
  const int32_t ti = int32_t(detail::float_bits(t)), n1 = ti >> 1, n2 = ti - n1;
  return p * detail::bits_float(uint32_t(n1 + 127) << 23) *
         detail::bits_float(uint32_t(n2 + 127) << 23);
}

template <class T>
struct ExpParts {
  T p;  // e^r
  T t;  // kShifter + n
};

// exp_poly after its clamp: x = n ln2 + r, and e^x = p * 2^n.
template <class T>
REPRISE_HD ExpParts<T> exp_parts(T x) {
  const T shifter = lit<T>(kShifter);
  const T t = fma_of(x, lit<T>(1.44269504088896341), shifter);
  const T n = t - shifter;
  const T r = fma_of(n, lit<T>(2.12194440e-4), fma_of(n, lit<T>(-0.693359375), x));
  T p = lit<T>(1.9875691500e-4);
  p = fma_of(p, r, lit<T>(1.3981999507e-3));
  p = fma_of(p, r, lit<T>(8.3334519073e-3));
  p = fma_of(p, r, lit<T>(4.1665795894e-2));
  p = fma_of(p, r, lit<T>(1.6666665459e-1));
  p = fma_of(p, r, lit<T>(5.0000001201e-1));
  p = fma_of(p, r * r, r) + lit<T>(1.0);
  return {p, t};
}

// e^x in f32: range reduction x = n ln2 + r with |r| <= ln2 / 2 (ln2 split
// in two, Cody and Waite's), Cephes expf's degree-6 polynomial for e^r in
// Horner form with fused multiply-adds, and 2^n applied by scale2. Within
// 1 ulp of exp over all floats (tests/cpu/exp_test.cpp). x is clamped to
// [-104, 89] first, and the clamped ends compute to what the unclamped
// values round to: e^-104 is below half the smallest subnormal, so 0, and
// above ln(FLT_MAX) = 88.7228391 the product p 2^128 overflows to +inf. The
// clamp takes x as the second operand, which vmin and vmax return when it
// is NaN, so a NaN passes through every step and comes out NaN.
template <class T>
REPRISE_HD T exp_poly(T x) {
  const ExpParts<T> e = exp_parts(vmax(lit<T>(-104.0), vmin(lit<T>(89.0), x)));
  return scale2(e.p, e.t);
}

// tanh in f32: for |x| < 0.625 Cephes tanhf's odd polynomial
// x + x^3 P(x^2), else 1 - 2 / (e^(2|x|) + 1) through exp_poly with x's
// sign (so +-1 from |x| > 9 on, where e^(2|x|) outgrows 2^26). Within 2 ulp
// of tanh over all floats (tests/cpu/exp_test.cpp); NaN for NaN, -0 for -0.
template <class T>
REPRISE_HD T tanh_poly(T x) {
  const T a = vmax(x, -x);
  const T s = x * x;
  T p = lit<T>(-5.70498872745e-3);
  p = fma_of(p, s, lit<T>(2.06390887954e-2));
  p = fma_of(p, s, lit<T>(-5.37397155531e-2));
  p = fma_of(p, s, lit<T>(1.33314422036e-1));
  p = fma_of(p, s, lit<T>(-3.33332819422e-1));
  const T small = fma_of(p * s, x, x);
  const T big = lit<T>(1.0) - lit<T>(2.0) / (exp_poly(a + a) + lit<T>(1.0));
  const T y = select(a < lit<T>(0.625), small, select(x < lit<T>(0.0), -big, big));
  return select((x != x) | (x == lit<T>(0.0)), x, y);  // NaN, and -0 keeps its sign
}

// x = m 2^e with m in [sqrt(1/2), sqrt(2)), for a positive normal x: m
// and e as floats, from x's bits. Adding 1 - sqrt(1/2)'s mantissa offset
// before taking the exponent moves the split from 1 to sqrt(1/2).
template <class T>
struct LogSplit {
  T m;
  T e;
};
inline constexpr uint32_t kSqrtHalfBits = 0x3f3504f3u;  // sqrt(1/2) as a float
REPRISE_HD LogSplit<float> log_split(float x) {
  const uint32_t u = detail::float_bits(x) + (0x3f800000u - kSqrtHalfBits);
  return {detail::bits_float((u & 0x007fffffu) + kSqrtHalfBits), float(int32_t(u >> 23) - 127)};
}

// log in f32: x = m 2^e (subnormals scaled by 2^23 first), Cephes logf's
// degree-9 polynomial for log(m) on [sqrt(1/2) - 1, sqrt(2) - 1) in Horner
// form with fused multiply-adds, e ln2 added in two parts (Cody and
// Waite's split). Within 1 ulp of log over all floats
// (tests/cpu/exp_test.cpp); -inf at 0, NaN below 0 and for NaN, inf at inf.
template <class T>
REPRISE_HD T log_poly(T x) {
  const auto tiny = x < lit<T>(1.17549435e-38);  // below the smallest normal
  const LogSplit<T> s = log_split(select(tiny, x * lit<T>(8388608.0), x));
  const T e = s.e - select(tiny, lit<T>(23), lit<T>(0));
  const T f = s.m - lit<T>(1);
  const T z = f * f;
  T p = lit<T>(7.0376836292e-2);
  p = fma_of(p, f, lit<T>(-1.1514610310e-1));
  p = fma_of(p, f, lit<T>(1.1676998740e-1));
  p = fma_of(p, f, lit<T>(-1.2420140846e-1));
  p = fma_of(p, f, lit<T>(1.4249322787e-1));
  p = fma_of(p, f, lit<T>(-1.6668057665e-1));
  p = fma_of(p, f, lit<T>(2.0000714765e-1));
  p = fma_of(p, f, lit<T>(-2.4999993993e-1));
  p = fma_of(p, f, lit<T>(3.3333331174e-1));
  T y = fma_of(e, lit<T>(-2.12194440e-4), p * f * z);
  y = fma_of(z, lit<T>(-0.5), y);
  T r = fma_of(e, lit<T>(0.693359375), f + y);
  const T inf = lit<T>(std::numeric_limits<float>::infinity());
  r = select(x == lit<T>(0), -inf, r);
  r = select(x == inf, x, r);
  return select((x < lit<T>(0)) | (x != x), lit<T>(std::numeric_limits<float>::quiet_NaN()), r);
}

// log(1 + x) in f32: u = 1 + x rounded, and log(u) x / (u - 1) corrects
// that rounding (Goldberg's); x itself where u is 1. Within 2 ulp.
template <class T>
REPRISE_HD T log1p_poly(T x) {
  const T u = lit<T>(1) + x;
  const T d = u - lit<T>(1);
  const auto exact = d == lit<T>(0);
  const T r = log_poly(u) * (x / select(exact, lit<T>(1), d));
  const T inf = lit<T>(std::numeric_limits<float>::infinity());
  return select(exact | (x == inf), x, r);
}

// e^x - 1 in f32: below 0.5 in magnitude x + x^2 P(x), P the polynomial
// exp_parts takes for e^r; e^x - 1 above. Within 2 ulp; -0 for -0.
template <class T>
REPRISE_HD T expm1_poly(T x) {
  T p = lit<T>(1.9875691500e-4);
  p = fma_of(p, x, lit<T>(1.3981999507e-3));
  p = fma_of(p, x, lit<T>(8.3334519073e-3));
  p = fma_of(p, x, lit<T>(4.1665795894e-2));
  p = fma_of(p, x, lit<T>(1.6666665459e-1));
  p = fma_of(p, x, lit<T>(5.0000001201e-1));
  const T small = select(x == lit<T>(0), x, fma_of(p, x * x, x));  // -0 keeps its sign
  return select(vmax(x, -x) < lit<T>(0.5), small, exp_poly(x) - lit<T>(1));
}

// sin and cos in f32: n = round(x 2/pi) by kShifter, r = x - n pi/2 with
// pi/2 in three parts (the first of 8 bits, so n times it is exact for
// |x| below 2^16 or so), Cephes sinf's and cosf's polynomials on r, and
// the quadrant from n's two low bits, found in floats. Within 2 ulp for
// |x| up to 1e6; NaN for +-inf, and sin(-0) is -0.
template <class T>
REPRISE_HD T floor_half(T n) {  // floor(n / 2) for an integral n, exactly
  return (fma_of(n, lit<T>(0.5), lit<T>(-0.25)) + lit<T>(kShifter)) - lit<T>(kShifter);
}
template <class T>
REPRISE_HD T sin_cos_poly(T x, bool cosine) {
  const T n = fma_of(x, lit<T>(0.636619772367581343), lit<T>(kShifter)) - lit<T>(kShifter);
  T r = fma_of(n, lit<T>(-1.5703125), x);
  r = fma_of(n, lit<T>(-4.83826792333275079727e-4), r);
  r = fma_of(n, lit<T>(-2.56334406825708960298e-12), r);
  const T z = r * r;
  T ps = lit<T>(-1.9515295891e-4);
  ps = fma_of(ps, z, lit<T>(8.3321608736e-3));
  ps = fma_of(ps, z, lit<T>(-1.6666654611e-1));
  const T s = fma_of(ps * z, r, r);
  T pc = lit<T>(2.443315711809948e-5);
  pc = fma_of(pc, z, lit<T>(-1.388731625493765e-3));
  pc = fma_of(pc, z, lit<T>(4.166664568298827e-2));
  const T c = fma_of(pc * z, z, fma_of(z, lit<T>(-0.5), lit<T>(1)));
  const T half = floor_half(n);
  const T odd = n - (half + half);                         // n mod 2
  const T second = half - (floor_half(half) * lit<T>(2));  // (n div 2) mod 2
  // sin by quadrant: s, c, -s, -c; cos: c, -s, -c, s.
  const T v = cosine ? select(odd == lit<T>(0), c, s) : select(odd == lit<T>(0), s, c);
  const auto negative = cosine ? second != odd : second != lit<T>(0);
  const T out = select(negative, -v, v);
  const T inf = lit<T>(std::numeric_limits<float>::infinity());
  const T sin_of_zero = cosine ? out : x;  // -0 keeps its sign
  return select(vmax(x, -x) == inf, lit<T>(std::numeric_limits<float>::quiet_NaN()),
                select(x == lit<T>(0), sin_of_zero, out));
}

// erf in f32: x P(x^2) / Q(x^2) on x clamped to [-4, 4] (beyond, erf is
// +-1 in f32), the rational minimax form Eigen and XLA use. Within 6 ulp.
template <class T>
REPRISE_HD T erf_poly(T a) {
  const T x = vmax(lit<T>(-4), vmin(lit<T>(4), a));
  const T x2 = x * x;
  T p = lit<T>(-2.72614225801306e-10);
  p = fma_of(p, x2, lit<T>(2.77068142495902e-08));
  p = fma_of(p, x2, lit<T>(-2.10102402082508e-06));
  p = fma_of(p, x2, lit<T>(-5.69250639462346e-05));
  p = fma_of(p, x2, lit<T>(-7.34990630326855e-04));
  p = fma_of(p, x2, lit<T>(-2.95459980854025e-03));
  p = fma_of(p, x2, lit<T>(-1.60960333262415e-02));
  T q = lit<T>(-1.45660718464996e-05);
  q = fma_of(q, x2, lit<T>(-2.13374055278905e-04));
  q = fma_of(q, x2, lit<T>(-1.68282697438203e-03));
  q = fma_of(q, x2, lit<T>(-7.37332916720468e-03));
  q = fma_of(q, x2, lit<T>(-1.42647390514189e-02));
  return (p / q) * x;  // x last: p x would lose the bits of a tiny x
}

// e^x, tanh, log, log1p, expm1, sin, cos and erf: the polynomials above in
// f32; f64 is the gradcheck type and keeps the C library's functions, the
// exact formulas.
REPRISE_HD float exp_of(float x) { return exp_poly(x); }
REPRISE_HD double exp_of(double x) { return std::exp(x); }
REPRISE_HD float log_of(float x) { return log_poly(x); }
REPRISE_HD double log_of(double x) { return std::log(x); }
REPRISE_HD float log1p_of(float x) { return log1p_poly(x); }
REPRISE_HD double log1p_of(double x) { return std::log1p(x); }
REPRISE_HD float expm1_of(float x) { return expm1_poly(x); }
REPRISE_HD double expm1_of(double x) { return std::expm1(x); }
REPRISE_HD float sin_of(float x) { return sin_cos_poly(x, false); }
REPRISE_HD double sin_of(double x) { return std::sin(x); }
REPRISE_HD float cos_of(float x) { return sin_cos_poly(x, true); }
REPRISE_HD double cos_of(double x) { return std::cos(x); }
REPRISE_HD float erf_of(float x) { return erf_poly(x); }
REPRISE_HD double erf_of(double x) { return std::erf(x); }
REPRISE_HD float sqrt_of(float x) { return std::sqrt(x); }
REPRISE_HD double sqrt_of(double x) { return std::sqrt(x); }
REPRISE_HD float tanh_of(float x) { return tanh_poly(x); }
REPRISE_HD double tanh_of(double x) { return std::tanh(x); }
REPRISE_HD float pow_of(float x, float e) { return std::pow(x, e); }
REPRISE_HD double pow_of(double x, double e) { return std::pow(x, e); }

struct Neg {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return -x;
  }
};
struct Exp {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return exp_of(x);
  }
};
struct Log {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return log_of(x);
  }
};
struct Sqrt {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return sqrt_of(x);
  }
};
struct Rsqrt {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return lit<T>(1) / sqrt_of(x);
  }
};
struct Relu {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return select(x > lit<T>(0), x, lit<T>(0));
  }
};
struct Sigmoid {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return lit<T>(1) / (lit<T>(1) + exp_of(-x));
  }
};
struct Tanh {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return tanh_of(x);
  }
};
// x * sigmoid(x)
struct Silu {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x / (lit<T>(1) + exp_of(-x));
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
    return lit<T>(kAlpha) * (x + lit<T>(kBeta) * x * x * x);
  }
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x / (lit<T>(1) + exp_of(lit<T>(-2) * inner(x)));
  }
};
// PyTorch's softplus with beta 1 and threshold 20: log(1 + e^x), and x
// itself above 20, where the two differ by less than e^-20.
struct Softplus {
  static constexpr double kThreshold = 20;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return select(x > lit<T>(kThreshold), x, log1p_of(exp_of(x)));
  }
};
struct Sin {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return sin_of(x);
  }
};
struct Cos {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return cos_of(x);
  }
};
struct Erf {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return erf_of(x);
  }
};
struct Log1p {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return log1p_of(x);
  }
};
struct Expm1 {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return expm1_of(x);
  }
};
// x Phi(x) = x (1 + erf(x / sqrt 2)) / 2: torch's approximate="none".
struct GeluErf {
  static constexpr double kInvSqrt2 = 0.7071067811865476;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return lit<T>(0.5) * x * (lit<T>(1) + erf_of(x * lit<T>(kInvSqrt2)));
  }
};
// min(x, 0) - log(1 + e^-|x|): torch's form, no overflow either way.
struct LogSigmoid {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return vmin(x, lit<T>(0)) - log1p_of(exp_of(-vmax(x, -x)));
  }
};
struct Abs {  // +0 for -0: the select keeps -0, the add makes it +0
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return select(x < lit<T>(0), -x, x) + lit<T>(0);
  }
};
struct Sign {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    const T zero_or_nan = select(x != x, x, lit<T>(0));
    return select(x > lit<T>(0), lit<T>(1), select(x < lit<T>(0), lit<T>(-1), zero_or_nan));
  }
};
struct Square {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x * x;
  }
};
struct Reciprocal {
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return lit<T>(1) / x;
  }
};
struct PowScalar {
  double exponent;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    if (exponent == 2.0) return x * x;
    return pow_of(x, lit<T>(exponent));
  }
};
struct AddScalar {
  double s;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x + lit<T>(s);
  }
};
struct MulScalar {
  double s;
  template <class T>
  REPRISE_HD T operator()(T x) const {
    return x * lit<T>(s);
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
    return g / (lit<T>(2) * y);
  }
};
struct RsqrtGrad {  // -y^3 / 2
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return lit<T>(-0.5) * g * y * y * y;
  }
};
struct ReluGrad {
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return select(x > lit<T>(0), g, lit<T>(0));
  }
};
struct SigmoidGrad {  // y (1 - y)
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return g * y * (lit<T>(1) - y);
  }
};
struct TanhGrad {  // 1 - y^2
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return g * (lit<T>(1) - y * y);
  }
};
struct SiluGrad {  // s (1 + x (1 - s)), s = sigmoid(x)
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    const T s = lit<T>(1) / (lit<T>(1) + exp_of(-x));
    return g * s * (lit<T>(1) + x * (lit<T>(1) - s));
  }
};
// With s = sigmoid(2 u) = 0.5 (1 + tanh(u)): 1 - tanh(u)^2 = 4 s (1 - s), so
// d/dx 0.5 x (1 + tanh(u)) = s + 2 x s (1 - s) du/dx.
struct GeluTanhGrad {
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    const T alpha = lit<T>(GeluTanh::kAlpha), beta = lit<T>(GeluTanh::kBeta);
    const T s = lit<T>(1) / (lit<T>(1) + exp_of(lit<T>(-2) * GeluTanh::inner(x)));
    const T d_inner = alpha * (lit<T>(1) + lit<T>(3) * beta * x * x);
    return g * (s + lit<T>(2) * x * s * (lit<T>(1) - s) * d_inner);
  }
};
struct SoftplusGrad {  // sigmoid(x) as e^x / (e^x + 1), PyTorch's form; 1 above 20
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    const T z = exp_of(x);
    return select(x > lit<T>(Softplus::kThreshold), g, g * z / (z + lit<T>(1)));
  }
};
struct SinGrad {  // cos x
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return cos_of(x) * g;
  }
};
struct CosGrad {  // -sin x
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return -(sin_of(x) * g);
  }
};
struct ErfGrad {  // 2 / sqrt(pi) e^(-x^2)
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return lit<T>(1.1283791670955126) * exp_of(-(x * x)) * g;
  }
};
struct Log1pGrad {  // 1 / (1 + x)
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return g / (lit<T>(1) + x);
  }
};
struct Expm1Grad {  // e^x = y + 1
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return (y + lit<T>(1)) * g;
  }
};
struct GeluErfGrad {  // Phi(x) + x phi(x)
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    const T cdf = lit<T>(0.5) * (lit<T>(1) + erf_of(x * lit<T>(GeluErf::kInvSqrt2)));
    const T pdf = lit<T>(0.3989422804014327) * exp_of(lit<T>(-0.5) * x * x);
    return (cdf + x * pdf) * g;
  }
};
struct LogSigmoidGrad {  // sigmoid(-x), from z = e^-|x|
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    const T z = exp_of(-vmax(x, -x));
    return select(x < lit<T>(0), lit<T>(1), z) / (lit<T>(1) + z) * g;
  }
};
struct AbsGrad {  // sign(x), 0 at 0 (torch's sgn)
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return select(x > lit<T>(0), g, select(x < lit<T>(0), -g, lit<T>(0)));
  }
};
struct Zero {  // the gradient of a step function
  template <class T>
  REPRISE_HD T operator()(T, T, T) const {
    return lit<T>(0);
  }
};
struct SquareGrad {  // 2 x
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    return (x + x) * g;
  }
};
struct ReciprocalGrad {  // -y^2
  template <class T>
  REPRISE_HD T operator()(T, T y, T g) const {
    return -(y * y) * g;
  }
};
struct PowScalarGrad {  // e x^(e-1)
  double exponent;
  template <class T>
  REPRISE_HD T operator()(T x, T, T g) const {
    if (exponent == 2.0) return g * lit<T>(2) * x;
    return g * lit<T>(exponent) * pow_of(x, lit<T>(exponent - 1.0));
  }
};

// splitmix64's finaliser: a 64-bit hash (recompute noise draws from it).
REPRISE_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Recompute noise: v moved by d representable values (toward +inf for
// d > 0, -inf for d < 0), each step one nextafter. bf16 and f16 step
// through their bit patterns ordered as sign-magnitude integers (the two
// zeros count as one). The caller keeps v where the result is not finite.
template <class F>
REPRISE_HD F step_ulps(F v, int64_t d) {
  if constexpr (is_16bit_float_v<F>) {
    const int64_t magnitude = v.bits & 0x7fff;
    const int64_t moved = ((v.bits & 0x8000) ? -magnitude : magnitude) + d;
    if (moved > 0x7fff || moved < -0x7fff) return v;
    return F::from_bits(uint16_t(moved < 0 ? 0x8000 | -moved : moved));
  } else {
    const F inf = F(INFINITY);
    for (; d > 0; --d) v = std::nextafter(v, inf);
    for (; d < 0; ++d) v = std::nextafter(v, -inf);
    return v;
  }
}

// Whether v is finite, for any floating element type.
template <class F>
REPRISE_HD bool is_finite(F v) {
  if constexpr (is_16bit_float_v<F>) {
    return std::isfinite(static_cast<float>(v));
  } else {
    return std::isfinite(v);
  }
}

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
// The larger and the smaller of a and b, NaN when either is (torch's).
struct Maximum {
  template <class T>
  REPRISE_HD T operator()(T a, T b) const {
    return select((a > b) | (a != a), a, b);
  }
};
struct Minimum {
  template <class T>
  REPRISE_HD T operator()(T a, T b) const {
    return select((a < b) | (a != a), a, b);
  }
};

// The comparisons of REPRISE_COMPARE_OPS, element by element: a 16-bit
// float compares as the f32 it widens to exactly.
template <class T>
REPRISE_HD auto comparable(T v) {
  if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
    return float(v);
  } else {
    return v;
  }
}
#define REPRISE_COMPARE_FUNCTOR(name, Functor, op) \
  struct Functor {                                 \
    template <class T>                             \
    REPRISE_HD bool operator()(T a, T b) const {   \
      return comparable(a) op comparable(b);       \
    }                                              \
  };
REPRISE_COMPARE_OPS(REPRISE_COMPARE_FUNCTOR)
#undef REPRISE_COMPARE_FUNCTOR

// silu(gate) * up, and its two gradients from (gate, up, dy), in the order
// silu followed by mul computes them, so the fused op has their bits.
struct Swiglu {
  template <class T>
  REPRISE_HD T operator()(T gate, T up) const {
    return Silu{}(gate)*up;
  }
  template <class T>
  REPRISE_HD static T dgate(T gate, T up, T dy) {
    return SiluGrad{}(gate, gate, dy * up);
  }
  template <class T>
  REPRISE_HD static T dup(T gate, T, T dy) {
    return dy * Silu{}(gate);
  }
};

}  // namespace reprise::fn
