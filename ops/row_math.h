#pragma once
// Building blocks of the row-wise kernels (softmax, cross_entropy, rmsnorm,
// layernorm): reductions over one contiguous row by one thread, and an exp
// that vectorises.
//
// The reductions keep 16 independent partial results so that the compiler
// vectorises them without reassociation flags; the partials are combined in
// a fixed order, so a row's result never depends on the thread count.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace reprise::ops::detail {

constexpr int kRowLanes = 16;

// sum of term(i) over i in [0, n), term returning T.
template <class T, class F>
T row_sum_of(int64_t n, F term) {
  T lanes[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) lanes[l] += term(i + l);
  }
  T s = 0;
  for (int l = 0; l < kRowLanes; ++l) s += lanes[l];
  for (; i < n; ++i) s += term(i);
  return s;
}

// max of x[0..n), n >= 1. A NaN may be skipped here; the callers still
// propagate it through their sum of exponentials.
template <class T>
T row_max(const T* x, int64_t n) {
  T lanes[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l) lanes[l] = x[0];
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
  }
  T m = lanes[0];
  for (int l = 1; l < kRowLanes; ++l) m = std::max(m, lanes[l]);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// exp(x) for f32 in straight-line code that the compiler vectorises (libm's
// expf is a call per element, ~10x slower in these loops). Range reduction
// x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact n ln2),
// Cephes expf's degree-6 polynomial for e^r, and 2^n applied as two factors
// so that subnormal results (x down to -104) come out right. Within 1.02
// ulp of exp over all floats (99% correctly rounded); +inf above
// 88.7228, 0 below -104, NaN for NaN.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kMax = 88.72283935546875f, kMin = -104.0f;
  const float xc = std::min(std::max(x, kMin), kMax);
  const float n = (xc * kLog2e + kShifter) - kShifter;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = int32_t(n), n1 = ni >> 1, n2 = ni - n1;  // n in [-150, 128]
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float y = p * s1 * s2;
  y = x > kMax ? std::numeric_limits<float>::infinity() : y;
  y = x < kMin ? 0.0f : y;
  return x != x ? x : y;
}

// exp for the row kernels: exp_f32 for f32, std::exp for f64.
template <class T>
T row_exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_f32(x);
  } else {
    return std::exp(x);
  }
}

// Rows per parallel task so that a task touches about 16K elements.
inline int64_t row_grain(int64_t row_length) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_length, 1));
}

}  // namespace reprise::ops::detail
