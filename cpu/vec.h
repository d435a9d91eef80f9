#pragma once
// Vectors of the CPU level being built (cpu/level.h): Native<T> is one
// register of T (64 bytes with AVX-512, 32 with AVX2, 16 at the scalar
// level, which is SSE2 on x86-64 and NEON on aarch64, both baseline), and
// V16<T> is 16 lanes of T as however many registers that takes.
//
// Kernels are written on V16, so a row's 16 partial sums, a tile's 16
// columns, the lanes an exp works on are the same at every level: only the
// number of registers changes, never which value goes where or the order of
// the roundings. V16 provides the helpers engine/functors.h's math uses
// (lit through splat, select, vmin, vmax, exp_of, ...), so the same functor
// runs on a scalar and on 16 lanes with the same bits.
//
// Everything is lane-wise IEEE arithmetic, written with the GCC/Clang vector
// extension; the compiler emits the level's instructions for it.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/hd.h"
#include "cpu/level.h"
#include "engine/elementwise_ops.h"
#include "engine/half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The shared math, compiled for this level: the first and only inclusion of
// engine/functors.h in a file of cpu/ is here, inside the level's ISA, so
// that its templates, instantiated on this level's vectors, use the level's
// instructions (its own includes are all above). Its functions are always
// inlined, so no copy of them is ever shared between levels.
REPRISE_CPU_TARGET_PUSH
#include "engine/functors.h"
REPRISE_CPU_TARGET_POP

REPRISE_CPU_BEGIN

#if defined(REPRISE_CPU_LEVEL_AVX512)
inline constexpr int kRegisterBytes = 64;
#elif defined(REPRISE_CPU_LEVEL_AVX2)
inline constexpr int kRegisterBytes = 32;
#else
inline constexpr int kRegisterBytes = 16;
#endif

typedef float NativeF32 __attribute__((vector_size(kRegisterBytes)));
typedef double NativeF64 __attribute__((vector_size(kRegisterBytes)));
typedef int32_t NativeI32 __attribute__((vector_size(kRegisterBytes)));
typedef int64_t NativeI64 __attribute__((vector_size(kRegisterBytes)));

template <class T>
struct NativeOf;
template <>
struct NativeOf<float> {
  using type = NativeF32;
  using mask = NativeI32;  // what a comparison of two NativeF32 gives
};
template <>
struct NativeOf<double> {
  using type = NativeF64;
  using mask = NativeI64;
};
template <class T>
using Native = typename NativeOf<T>::type;
template <class T>
using NativeMask = typename NativeOf<T>::mask;
// Lanes of one register.
template <class T>
inline constexpr int kLanes = kRegisterBytes / int(sizeof(T));

// a * b + c rounded once, lane by lane.
REPRISE_CPU_INLINE NativeF32 fma_native(NativeF32 a, NativeF32 b, NativeF32 c) {
#if defined(REPRISE_CPU_LEVEL_AVX512)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  return _mm256_fmadd_ps(a, b, c);
#else
  NativeF32 r;
  for (int l = 0; l < kLanes<float>; ++l) r[l] = std::fma(a[l], b[l], c[l]);
  return r;
#endif
}
REPRISE_CPU_INLINE NativeF64 fma_native(NativeF64 a, NativeF64 b, NativeF64 c) {
#if defined(REPRISE_CPU_LEVEL_AVX512)
  return _mm512_fmadd_pd(a, b, c);
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  return _mm256_fmadd_pd(a, b, c);
#else
  NativeF64 r;
  for (int l = 0; l < kLanes<double>; ++l) r[l] = std::fma(a[l], b[l], c[l]);
  return r;
#endif
}

template <class T>
REPRISE_CPU_INLINE Native<T> load_native(const T* p) {
  Native<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
REPRISE_CPU_INLINE void store_native(T* p, Native<T> v) {
  std::memcpy(p, &v, sizeof v);
}
// Every lane x: one broadcast (`Native<T>{} + x` would add 0 first, which
// the compiler must keep: -0 + 0 is +0).
template <class T>
REPRISE_CPU_INLINE Native<T> splat_native(T x) {
#if defined(REPRISE_CPU_LEVEL_AVX512)
  if constexpr (sizeof(T) == 4) {
    return _mm512_set1_ps(x);
  } else {
    return _mm512_set1_pd(x);
  }
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  if constexpr (sizeof(T) == 4) {
    return _mm256_set1_ps(x);
  } else {
    return _mm256_set1_pd(x);
  }
#elif defined(__SSE2__)
  if constexpr (sizeof(T) == 4) {
    return _mm_set1_ps(x);
  } else {
    return _mm_set1_pd(x);
  }
#else
  Native<T> v;
  for (int l = 0; l < kLanes<T>; ++l) v[l] = x;
  return v;
#endif
}

#if defined(REPRISE_CPU_LEVEL_AVX2)
// The AVX2 mask of lanes [0, n): all ones where the lane index is below n.
template <class T>
REPRISE_CPU_INLINE NativeMask<T> lanes_below(int64_t n) {
  NativeMask<T> index;
  for (int l = 0; l < kLanes<T>; ++l) index[l] = l;
  using Lane = std::remove_cvref_t<decltype(index[0])>;
  return index < NativeMask<T>{} + Lane(n);
}
#endif

// The first n lanes (0 <= n <= lanes) of a register from p, the rest 0:
// masked loads, which never touch memory past lane n - 1.
template <class T>
REPRISE_CPU_INLINE Native<T> load_first_native(const T* p, int64_t n) {
  if (n >= kLanes<T>) return load_native(p);
#if defined(REPRISE_CPU_LEVEL_AVX512)
  const __mmask16 m = __mmask16((1u << (n > 0 ? n : 0)) - 1);
  if constexpr (sizeof(T) == 4) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    return _mm512_maskz_loadu_pd(__mmask8(m), p);
  }
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  const NativeMask<T> m = lanes_below<T>(n);
  if constexpr (sizeof(T) == 4) {
    return _mm256_maskload_ps(p, (__m256i)m);
  } else {
    return _mm256_maskload_pd(p, (__m256i)m);
  }
#else
  T lanes[kLanes<T>] = {};
  std::memcpy(lanes, p, size_t(n > 0 ? n : 0) * sizeof(T));
  return load_native(lanes);
#endif
}

// Stores the first n lanes (0 <= n <= lanes) of v at p.
template <class T>
REPRISE_CPU_INLINE void store_first_native(T* p, Native<T> v, int64_t n) {
  if (n >= kLanes<T>) return store_native(p, v);
#if defined(REPRISE_CPU_LEVEL_AVX512)
  const __mmask16 m = __mmask16((1u << (n > 0 ? n : 0)) - 1);
  if constexpr (sizeof(T) == 4) {
    _mm512_mask_storeu_ps(p, m, v);
  } else {
    _mm512_mask_storeu_pd(p, __mmask8(m), v);
  }
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  const NativeMask<T> m = lanes_below<T>(n);
  if constexpr (sizeof(T) == 4) {
    _mm256_maskstore_ps(p, (__m256i)m, v);
  } else {
    _mm256_maskstore_pd(p, (__m256i)m, v);
  }
#else
  T lanes[kLanes<T>];
  store_native(lanes, v);
  std::memcpy(p, lanes, size_t(n > 0 ? n : 0) * sizeof(T));
#endif
}

// 16 lanes of a comparison: all ones where true.
template <class T>
struct M16 {
  static constexpr int kParts = 16 / kLanes<T>;
  NativeMask<T> p[kParts];
};

// 16 lanes of T.
template <class T>
struct V16 {
  static constexpr int kParts = 16 / kLanes<T>;
  Native<T> p[kParts];

  REPRISE_CPU_INLINE static V16 splat(double v) {
    V16 r;
    for (int i = 0; i < kParts; ++i) r.p[i] = splat_native(T(v));
    return r;
  }
  REPRISE_CPU_INLINE static V16 load(const T* x) {
    V16 r;
    for (int i = 0; i < kParts; ++i) r.p[i] = load_native(x + i * kLanes<T>);
    return r;
  }
  // The first n (< 16) lanes from x, the rest 0.
  REPRISE_CPU_INLINE static V16 load_first(const T* x, int64_t n) {
    V16 r;
    for (int i = 0; i < kParts; ++i)
      r.p[i] = load_first_native(x + i * kLanes<T>, n - i * kLanes<T>);
    return r;
  }
  REPRISE_CPU_INLINE void store(T* x) const {
    for (int i = 0; i < kParts; ++i) store_native(x + i * kLanes<T>, p[i]);
  }
  // Stores the first n (< 16) lanes.
  REPRISE_CPU_INLINE void store_first(T* x, int64_t n) const {
    for (int i = 0; i < kParts; ++i) store_first_native(x + i * kLanes<T>, p[i], n - i * kLanes<T>);
  }
  REPRISE_CPU_INLINE T lane(int l) const { return p[l / kLanes<T>][l % kLanes<T>]; }
};

#define REPRISE_V16_BINARY(op)                                     \
  template <class T>                                               \
  REPRISE_CPU_INLINE V16<T> operator op(V16<T> a, V16<T> b) {      \
    for (int i = 0; i < V16<T>::kParts; ++i) a.p[i] op## = b.p[i]; \
    return a;                                                      \
  }
REPRISE_V16_BINARY(+)
REPRISE_V16_BINARY(-)
REPRISE_V16_BINARY(*)
REPRISE_V16_BINARY(/)
#undef REPRISE_V16_BINARY

template <class T>
REPRISE_CPU_INLINE V16<T> operator-(V16<T> a) {
  for (int i = 0; i < V16<T>::kParts; ++i) a.p[i] = -a.p[i];
  return a;
}

#define REPRISE_V16_COMPARE(op)                                         \
  template <class T>                                                    \
  REPRISE_CPU_INLINE M16<T> operator op(V16<T> a, V16<T> b) {           \
    M16<T> m;                                                           \
    for (int i = 0; i < V16<T>::kParts; ++i) m.p[i] = a.p[i] op b.p[i]; \
    return m;                                                           \
  }
REPRISE_V16_COMPARE(<)
REPRISE_V16_COMPARE(<=)
REPRISE_V16_COMPARE(>)
REPRISE_V16_COMPARE(>=)
REPRISE_V16_COMPARE(==)
REPRISE_V16_COMPARE(!=)
#undef REPRISE_V16_COMPARE

template <class T>
REPRISE_CPU_INLINE M16<T> operator&(M16<T> a, M16<T> b) {
  for (int i = 0; i < M16<T>::kParts; ++i) a.p[i] &= b.p[i];
  return a;
}
template <class T>
REPRISE_CPU_INLINE M16<T> operator|(M16<T> a, M16<T> b) {
  for (int i = 0; i < M16<T>::kParts; ++i) a.p[i] |= b.p[i];
  return a;
}

// m ? a : b, lane by lane (found by argument-dependent lookup from the
// functors).
template <class T>
REPRISE_CPU_INLINE V16<T> select(M16<T> m, V16<T> a, V16<T> b) {
  V16<T> r;
  for (int i = 0; i < V16<T>::kParts; ++i) {
    // Casts between vectors of one size reinterpret the bits.
    const NativeMask<T> bits = ((NativeMask<T>)a.p[i] & m.p[i]) | ((NativeMask<T>)b.p[i] & ~m.p[i]);
    r.p[i] = (Native<T>)bits;
  }
  return r;
}

// a < b ? a : b (kMax false) or a > b ? a : b (kMax true), lane by lane:
// the rule of x86's MIN and MAX instructions (the second operand when
// either is NaN or both are zeros), so there they are one instruction.
// (AVX-512's are written with a full mask: GCC 12 warns that the unmasked
// intrinsics read an uninitialised vector.)
template <bool kMax, class T>
REPRISE_CPU_INLINE Native<T> min_max_native(Native<T> a, Native<T> b) {
  constexpr bool f32 = sizeof(T) == 4;
#if defined(REPRISE_CPU_LEVEL_AVX512)
  if constexpr (f32) {
    return kMax ? _mm512_maskz_max_ps(__mmask16(0xffff), a, b)
                : _mm512_maskz_min_ps(__mmask16(0xffff), a, b);
  } else {
    return kMax ? _mm512_maskz_max_pd(__mmask8(0xff), a, b)
                : _mm512_maskz_min_pd(__mmask8(0xff), a, b);
  }
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  if constexpr (f32) {
    return kMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
  } else {
    return kMax ? _mm256_max_pd(a, b) : _mm256_min_pd(a, b);
  }
#elif defined(__SSE2__)
  if constexpr (f32) {
    return kMax ? _mm_max_ps(a, b) : _mm_min_ps(a, b);
  } else {
    return kMax ? _mm_max_pd(a, b) : _mm_min_pd(a, b);
  }
#else
  return (kMax ? a > b : a < b) ? a : b;
#endif
}

// fn::vmin and fn::vmax on 16 lanes.
template <class T>
REPRISE_CPU_INLINE V16<T> vmin(V16<T> a, V16<T> b) {
  for (int i = 0; i < V16<T>::kParts; ++i) a.p[i] = min_max_native<false, T>(a.p[i], b.p[i]);
  return a;
}
template <class T>
REPRISE_CPU_INLINE V16<T> vmax(V16<T> a, V16<T> b) {
  for (int i = 0; i < V16<T>::kParts; ++i) a.p[i] = min_max_native<true, T>(a.p[i], b.p[i]);
  return a;
}

// a * b + c rounded once per lane.
template <class T>
REPRISE_CPU_INLINE V16<T> fma_of(V16<T> a, V16<T> b, V16<T> c) {
  for (int i = 0; i < V16<T>::kParts; ++i) c.p[i] = fma_native(a.p[i], b.p[i], c.p[i]);
  return c;
}

// A lane-wise call of a scalar function (the compiler vectorises those it
// has instructions for, such as sqrt).
template <class T, class F>
REPRISE_CPU_INLINE V16<T> lanewise(V16<T> x, F f) {
  T lanes[16];
  x.store(lanes);
  for (int l = 0; l < 16; ++l) lanes[l] = f(lanes[l]);
  return V16<T>::load(lanes);
}

// p * 2^n, rounded once, where t = fn::kShifter + n, as fn::scale2 gives
// it for one float: AVX-512 has the instruction (VSCALEFPS, one rounding of
// the exact product); the other levels multiply by two powers of two built
// from t's bits as fn::scale2.
REPRISE_CPU_INLINE V16<float> scale2(V16<float> p, V16<float> t) {
  for (int i = 0; i < V16<float>::kParts; ++i) {
#if defined(REPRISE_CPU_LEVEL_AVX512)
    const NativeF32 n = t.p[i] - splat_native(fn::kShifter);
    p.p[i] = _mm512_maskz_scalef_ps(__mmask16(0xffff), p.p[i], n);
#else
    const NativeI32 ti = (NativeI32)t.p[i], n1 = ti >> 1, n2 = ti - n1;
    const NativeI32 s1 = (n1 + 127) << 23, s2 = (n2 + 127) << 23;
    p.p[i] = p.p[i] * (NativeF32)s1 * (NativeF32)s2;
#endif
  }
  return p;
}

#if !defined(REPRISE_CPU_LEVEL_AVX512)
// Whether |x| <= bound in every lane (false for a NaN lane).
REPRISE_CPU_INLINE bool all_abs_within(V16<float> x, float bound) {
  NativeI32 ok = NativeI32{} - 1;
  for (int i = 0; i < V16<float>::kParts; ++i) {
    const NativeF32 a = (NativeF32)((NativeI32)x.p[i] & 0x7fffffff);
    ok &= a <= splat_native(bound);
  }
#if defined(REPRISE_CPU_LEVEL_AVX2)
  return _mm256_movemask_ps((__m256)ok) == 0xff;
#elif defined(__SSE2__)
  return _mm_movemask_ps((__m128)ok) == 0xf;
#else
  for (int l = 1; l < kLanes<float>; ++l) ok[0] &= ok[l];
  return ok[0] != 0;
#endif
}
#endif

// fn::exp_poly on 16 lanes. Forced inline: the polynomial is long enough
// that the compiler would otherwise call it once per 16 lanes. Below
// AVX-512, where scale2 takes two multiplications and the integer work for
// their factors, a vector whose lanes all have |x| <= 87 takes a shorter
// path with the same bits: the clamp changes nothing there, and n = round(x
// / ln2) lies in [-126, 126], so 2^n is a normal float and p * 2^n rounds
// the exact product once, as scale2's two factors do. (kShifter's bits
// vanish from the factor's exponent field after the shift, as in scale2.)
REPRISE_HD V16<float> exp_of(V16<float> x) {
#if !defined(REPRISE_CPU_LEVEL_AVX512)
  if (all_abs_within(x, 87.0f)) {
    const fn::ExpParts<V16<float>> e = fn::exp_parts(x);
    for (int i = 0; i < V16<float>::kParts; ++i)
      x.p[i] = e.p.p[i] * (NativeF32)(((NativeI32)e.t.p[i] + 127) << 23);
    return x;
  }
#endif
  return fn::exp_poly(x);
}
REPRISE_CPU_INLINE V16<double> exp_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::exp(v); });
}
// fn::log_split on 16 lanes: the same unsigned integer steps on each
// lane's bits (unsigned, as there: a NaN's bits plus the offset wrap).
REPRISE_CPU_INLINE fn::LogSplit<V16<float>> log_split(V16<float> x) {
  typedef uint32_t NativeU32 __attribute__((vector_size(kRegisterBytes)));
  fn::LogSplit<V16<float>> out;
  const NativeU32 offset = NativeU32{} + (0x3f800000u - fn::kSqrtHalfBits);
  for (int i = 0; i < V16<float>::kParts; ++i) {
    const NativeU32 u = (NativeU32)x.p[i] + offset;
    out.m.p[i] = (NativeF32)((u & 0x007fffffu) + fn::kSqrtHalfBits);
    out.e.p[i] = __builtin_convertvector((NativeI32)(u >> 23) - 127, NativeF32);
  }
  return out;
}
// The f32 functions as engine/functors.h defines them; f64 lane by lane
// through the C library, as there.
REPRISE_HD V16<float> log_of(V16<float> x) { return fn::log_poly(x); }
REPRISE_HD V16<float> log1p_of(V16<float> x) { return fn::log1p_poly(x); }
REPRISE_HD V16<float> expm1_of(V16<float> x) { return fn::expm1_poly(x); }
REPRISE_HD V16<float> sin_of(V16<float> x) { return fn::sin_cos_poly(x, false); }
REPRISE_HD V16<float> cos_of(V16<float> x) { return fn::sin_cos_poly(x, true); }
REPRISE_HD V16<float> erf_of(V16<float> x) { return fn::erf_poly(x); }
REPRISE_CPU_INLINE V16<double> log_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::log(v); });
}
REPRISE_CPU_INLINE V16<double> log1p_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::log1p(v); });
}
REPRISE_CPU_INLINE V16<double> expm1_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::expm1(v); });
}
REPRISE_CPU_INLINE V16<double> sin_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::sin(v); });
}
REPRISE_CPU_INLINE V16<double> cos_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::cos(v); });
}
REPRISE_CPU_INLINE V16<double> erf_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::erf(v); });
}
template <class T>
REPRISE_CPU_INLINE V16<T> sqrt_of(V16<T> x) {
  return lanewise(x, [](T v) { return std::sqrt(v); });
}
REPRISE_HD V16<float> tanh_of(V16<float> x) { return fn::tanh_poly(x); }
REPRISE_CPU_INLINE V16<double> tanh_of(V16<double> x) {
  return lanewise(x, [](double v) { return std::tanh(v); });
}
template <class T>
REPRISE_CPU_INLINE V16<T> pow_of(V16<T> x, V16<T> e) {
  T base[16], exponent[16];
  x.store(base);
  e.store(exponent);
  for (int l = 0; l < 16; ++l) base[l] = std::pow(base[l], exponent[l]);
  return V16<T>::load(base);
}

// The 16 lanes summed in a fixed order: pairs (l, l + 8), then (l, l + 4),
// (l, l + 2), (l, l + 1). Every level folds the same pairs.
template <class T>
REPRISE_CPU_INLINE T fold_sum(V16<T> v) {
  T x[16];
  v.store(x);
  for (int half = 8; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) x[l] += x[l + half];
  }
  return x[0];
}
// The largest lane (NaN lanes as MAXPS sees them: the second operand).
template <class T>
REPRISE_CPU_INLINE T fold_max(V16<T> v) {
  T x[16];
  v.store(x);
  for (int half = 8; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) x[l] = x[l] > x[l + half] ? x[l] : x[l + half];
  }
  return x[0];
}

// bf16 bits for one register of f32 lanes, and the conversions: widening
// is exact; rounding is to nearest, ties to even, a NaN staying a quiet NaN
// (engine/half.h's bfloat16, lane by lane).
typedef uint16_t NativeBf16 __attribute__((vector_size(kRegisterBytes / 2)));
typedef uint32_t NativeU32Lanes __attribute__((vector_size(kRegisterBytes)));

REPRISE_CPU_INLINE NativeF32 widen_bf16(NativeBf16 h) {
  return (NativeF32)(__builtin_convertvector(h, NativeU32Lanes) << 16);
}
REPRISE_CPU_INLINE NativeBf16 round_to_bf16(NativeF32 v) {
  const NativeU32Lanes u = (NativeU32Lanes)v;
  const NativeU32Lanes rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const NativeU32Lanes nan = (NativeU32Lanes)((u & 0x7fffffffu) > 0x7f800000u);
  return __builtin_convertvector((rounded & ~nan) | (((u >> 16) | 0x40u) & nan), NativeBf16);
}

// 16 lanes of bf16 widened to f32 (the first n, the rest 0), and 16 lanes
// of f32 rounded to bf16 (the first n stored).
REPRISE_CPU_INLINE V16<float> load_bf16(const bfloat16* p, int64_t n = 16) {
  constexpr int L = kLanes<float>;
  V16<float> r;
  for (int i = 0; i < V16<float>::kParts; ++i) {
    NativeBf16 h{};
    const int64_t count = n - i * L;
    if (count >= L) {
      std::memcpy(&h, p + i * L, sizeof h);
    } else if (count > 0) {
      std::memcpy(&h, p + i * L, size_t(count) * sizeof(bfloat16));
    }
    r.p[i] = widen_bf16(h);
  }
  return r;
}
// The first n lanes of v (all of them for n >= its lanes) rounded to bf16
// at p.
REPRISE_CPU_INLINE void store_first_bf16(bfloat16* p, NativeF32 v, int64_t n) {
  const NativeBf16 h = round_to_bf16(v);
  if (n >= kLanes<float>) {
    std::memcpy(static_cast<void*>(p), &h, sizeof h);  // a fixed size: no call
  } else if (n > 0) {
    std::memcpy(static_cast<void*>(p), &h, size_t(n) * sizeof(bfloat16));
  }
}
REPRISE_CPU_INLINE void store_bf16(bfloat16* p, V16<float> v, int64_t n = 16) {
  constexpr int L = kLanes<float>;
  for (int i = 0; i < V16<float>::kParts; ++i) store_first_bf16(p + i * L, v.p[i], n - i * L);
}

// 16 lanes of T from p (the first n, the rest 0) as ComputeType<T>, and
// back (the first n stored).
template <class T>
REPRISE_CPU_INLINE auto load_lanes(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return load_bf16(p, n);
  } else {
    return n >= 16 ? V16<T>::load(p) : V16<T>::load_first(p, n);
  }
}
template <class T, class V>
REPRISE_CPU_INLINE void store_lanes(T* p, const V& v, int64_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    store_bf16(p, v, n);
  } else if (n >= 16) {
    v.store(p);
  } else {
    v.store_first(p, n);
  }
}

REPRISE_CPU_END
