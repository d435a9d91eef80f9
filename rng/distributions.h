#pragma once
// From random 32-bit words to values: cuRAND's conventions for uniform,
// normal (Box-Muller) and Bernoulli variates, written so that the same words
// give the same bits on every target.
//
// Why our own log, sin and cos: the libm functions differ between glibc,
// CUDA and vector math libraries in the last bit (cuRAND itself uses sinf on
// the host and the approximate __sincosf on the device, so its host and device
// normals differ). Here every step is an IEEE-exact operation (+, -, *, /,
// sqrt, conversions, and explicit fma), and no product feeds a sum except
// through std::fma, so there is nothing for a compiler to contract: a scalar
// loop, an AVX-512 loop and a CUDA kernel produce identical bits. The price is
// accuracy within 2 ulp instead of libm's ~0.5-1 ulp (the tests bound it
// against long double), irrelevant for sampling.
//
// Word usage (element i of a fill, words counted from the reservation's
// offset):
//   uniform float    word i                       (0, 1], curand_uniform
//   uniform double   words 2i, 2i+1               (0, 1], curand_uniform2_double
//   normal float     pair j = i/2: words 2j, 2j+1 curand_normal, curand_normal2
//                    element 2j = r sin(theta), element 2j+1 = r cos(theta),
//                    r = sqrt(-2 log u(word 2j)), theta = 2 pi u'(word 2j+1)
//   normal double    pair j: words 4j .. 4j+3     curand_normal_double, curand_normal2_double
//                    u from words (4j, 4j+1), theta/pi from (4j+2, 4j+3);
//                    element 2j = r sinpi, element 2j+1 = r cospi
//   bernoulli float  word i: 1 when uniform float(word i) <= p
// An odd-length normal fill still consumes its last pair and drops the cosine.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/hd.h"

namespace reprise::rng {

namespace detail {

REPRISE_HD uint32_t bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
REPRISE_HD float float_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
REPRISE_HD uint64_t bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
REPRISE_HD double double_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

// log(1 + f) for f = m - 1, m in [sqrt(1/2), sqrt(2)), as in fdlibm:
// with s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - hfsq + s (hfsq + R),
// hfsq = f^2 / 2, R = sum_k 2 s^(2k) / (2k + 1). |s| <= 0.1716, so the Taylor
// coefficients of R converge fast: 5 terms leave < 0.05 ulp in float, 11 in
// double. The exponent is added back as e * ln2 split in a high part with
// trailing zeros (e * hi exact) and a low part.
REPRISE_HD float log_portable(float x) {
  const uint32_t shifted = bits(x) - 0x3f3504f3u;  // bits of sqrt(1/2)
  const float e = float(int32_t(shifted) >> 23);
  const float f = float_from_bits((shifted & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  const float s = f / (2.0f + f);
  const float z = s * s;
  const float hfsq = 0.5f * f * f;
  float p = 0x1.745d18p-3f;            // 2/11
  p = std::fma(z, p, 0x1.c71c72p-3f);  // 2/9
  p = std::fma(z, p, 0x1.24924ap-2f);  // 2/7
  p = std::fma(z, p, 0x1.99999ap-2f);  // 2/5
  p = std::fma(z, p, 0x1.555556p-1f);  // 2/3
  const float log1p_f = f + std::fma(s, std::fma(z, p, hfsq), -hfsq);
  return std::fma(e, 0x1.62ep-1f, std::fma(e, 0x1.0bfbe8p-15f, log1p_f));
}

REPRISE_HD double log_portable(double x) {
  const uint64_t shifted = bits(x) - 0x3fe6a09e667f3bcdull;  // bits of sqrt(1/2)
  const double e = double(int64_t(shifted) >> 52);
  const double f =
      double_from_bits((shifted & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull) - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double hfsq = 0.5 * f * f;
  double p = 0x1.642c8590b2164p-4;           // 2/23
  p = std::fma(z, p, 0x1.8618618618618p-4);  // 2/21
  p = std::fma(z, p, 0x1.af286bca1af28p-4);  // 2/19
  p = std::fma(z, p, 0x1.e1e1e1e1e1e1ep-4);  // 2/17
  p = std::fma(z, p, 0x1.1111111111111p-3);  // 2/15
  p = std::fma(z, p, 0x1.3b13b13b13b14p-3);  // 2/13
  p = std::fma(z, p, 0x1.745d1745d1746p-3);  // 2/11
  p = std::fma(z, p, 0x1.c71c71c71c71cp-3);  // 2/9
  p = std::fma(z, p, 0x1.2492492492492p-2);  // 2/7
  p = std::fma(z, p, 0x1.999999999999ap-2);  // 2/5
  p = std::fma(z, p, 0x1.5555555555555p-1);  // 2/3
  const double log1p_f = f + std::fma(s, std::fma(z, p, hfsq), -hfsq);
  return std::fma(e, 0x1.62e42fee00000p-1, std::fma(e, 0x1.a39ef35793c76p-33, log1p_f));
}

// sin and cos of x for 0 <= x < 8 (Box-Muller's angle is in (0, 2 pi]).
// Cody-Waite reduction x = k pi/2 + r, |r| <= pi/4, with pi/2 in three
// floats: with k <= 5, fma(-k, hi, x) is exact, and the third part matters
// where x is within 1e-8 of a multiple of pi/2 (r tiny, cos or sin near 0).
// Then Taylor polynomials in r (next term < 0.05 ulp), and the quadrant
// k mod 4 picks signs and swaps.
REPRISE_HD void sincos_portable(float x, float& sin_x, float& cos_x) {
  constexpr float kShifter = 0x1.8p23f;  // adding it rounds to an integer kept in the low bits
  const float kq = std::fma(x, 0x1.45f306p-1f, kShifter);  // 2/pi
  const uint32_t q = bits(kq);
  const float k = kq - kShifter;
  float r = std::fma(-k, 0x1.921fb6p+0f, x);  // pi/2 = hi + mid + lo
  r = std::fma(-k, -0x1.777a5cp-25f, r);
  r = std::fma(-k, -0x1.ee59dap-50f, r);
  const float w = r * r;
  float ps = 0x1.71de3ap-19f;              // 1/9!
  ps = std::fma(w, ps, -0x1.a01a02p-13f);  // -1/7!
  ps = std::fma(w, ps, 0x1.111112p-7f);    // 1/5!
  ps = std::fma(w, ps, -0x1.555556p-3f);   // -1/3!
  const float sin_r = std::fma(r * w, ps, r);
  float pc = -0x1.27e4fcp-22f;             // -1/10!
  pc = std::fma(w, pc, 0x1.a01a02p-16f);   // 1/8!
  pc = std::fma(w, pc, -0x1.6c16c2p-10f);  // -1/6!
  pc = std::fma(w, pc, 0x1.555556p-5f);    // 1/4!
  pc = std::fma(w, pc, -0.5f);
  const float cos_r = std::fma(w, pc, 1.0f);
  const float a = (q & 1) ? cos_r : sin_r;
  const float b = (q & 1) ? sin_r : cos_r;
  sin_x = (q & 2) ? -a : a;
  cos_x = ((q + 1) & 2) ? -b : b;
}

// sin(pi x) and cos(pi x) for 0 <= x < 4 (the double Box-Muller angle is pi
// times a value in (0, 2], as in CUDA's sincospi). The reduction x = k/2 + r
// is exact; then Taylor polynomials in r, |r| <= 1/4.
REPRISE_HD void sincospi_portable(double x, double& sin_x, double& cos_x) {
  constexpr double kShifter = 0x1.8p52;
  const double kq = std::fma(x, 2.0, kShifter);
  const uint64_t q = bits(kq);
  const double k = kq - kShifter;
  const double r = std::fma(k, -0.5, x);
  const double t = r * r;
  double ps = -0x1.8a404211f9547p-26;  // coefficients (-1)^n pi^(2n+1) / (2n+1)!
  ps = std::fma(t, ps, 0x1.aaec32af93359p-21);
  ps = std::fma(t, ps, -0x1.6fadb9f155744p-16);
  ps = std::fma(t, ps, 0x1.e8f434d018d63p-12);
  ps = std::fma(t, ps, -0x1.e3074fde8871fp-8);
  ps = std::fma(t, ps, 0x1.50783487ee782p-4);
  ps = std::fma(t, ps, -0x1.32d2cce62bd86p-1);
  ps = std::fma(t, ps, 0x1.466bc6775aae2p+1);
  ps = std::fma(t, ps, -0x1.4abbce625be53p+2);
  ps = std::fma(t, ps, 0x1.921fb54442d18p+1);
  const double sin_r = r * ps;
  double pc = -0x1.2a0c591af8314p-23;  // coefficients (-1)^n pi^(2n) / (2n)!
  pc = std::fma(t, pc, 0x1.20c62c2f2d7f5p-18);
  pc = std::fma(t, pc, -0x1.b6e24f44b128fp-14);
  pc = std::fma(t, pc, 0x1.f9d38a3763cc3p-10);
  pc = std::fma(t, pc, -0x1.a6d1f2a204a8cp-6);
  pc = std::fma(t, pc, 0x1.e1f506891babbp-3);
  pc = std::fma(t, pc, -0x1.55d3c7e3cbffap+0);
  pc = std::fma(t, pc, 0x1.03c1f081b5ac4p+2);
  pc = std::fma(t, pc, -0x1.3bd3cc9be45dep+2);
  const double cos_r = std::fma(t, pc, 1.0);
  const double a = (q & 1) ? cos_r : sin_r;
  const double b = (q & 1) ? sin_r : cos_r;
  sin_x = (q & 2) ? -a : a;
  cos_x = ((q + 1) & 2) ? -b : b;
}

}  // namespace detail

// cuRAND's float uniform: w * 2^-32 + 2^-33, in (0, 1]. The product is exact,
// so it does not matter whether a compiler fuses it.
REPRISE_HD float uniform_float(uint32_t w) { return std::fma(float(w), 0x1p-32f, 0x1p-33f); }

// cuRAND's 53-bit double uniform from two words, in (0, 1]; the words overlap
// in bits 21..31 (cuRAND xors them, and so do we).
REPRISE_HD double uniform_double(uint32_t w0, uint32_t w1) {
  const uint64_t z = uint64_t{w0} ^ (uint64_t{w1} << 21);
  return std::fma(double(z), 0x1p-53, 0x1p-54);
}

// Two standard normals from two words (cuRAND's float Box-Muller):
// u = uniform_float(w0), theta = w1 * 2pi 2^-32 + pi 2^-32 in (0, 2pi] with
// cuRAND's float constant for 2pi; z0 = r sin(theta), z1 = r cos(theta).
REPRISE_HD void box_muller(uint32_t w0, uint32_t w1, float& z0, float& z1) {
  const float u = uniform_float(w0);
  const float theta = std::fma(float(w1), 0x1.921fb6p-30f, 0x1.921fb6p-31f);
  const float radius = std::sqrt(-2.0f * detail::log_portable(u));
  float s, c;
  detail::sincos_portable(theta, s, c);
  z0 = radius * s;
  z1 = radius * c;
}

// Two standard normals from four words (cuRAND's double Box-Muller):
// u = uniform_double(w0, w1), t = 53 bits of (w2, w3) * 2^-52 + 2^-53 in
// (0, 2]; z0 = r sinpi(t), z1 = r cospi(t).
REPRISE_HD void box_muller(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, double& z0,
                           double& z1) {
  const double u = uniform_double(w0, w1);
  const uint64_t zt = uint64_t{w2} ^ (uint64_t{w3} << 21);
  const double t = std::fma(double(zt), 0x1p-52, 0x1p-53);
  const double radius = std::sqrt(-2.0 * detail::log_portable(u));
  double s, c;
  detail::sincospi_portable(t, s, c);
  z0 = radius * s;
  z1 = radius * c;
}

// The largest float <= p, p in [0, 1]: since uniforms are floats,
// uniform_float(w) <= p exactly when uniform_float(w) <= bernoulli_threshold(p),
// so the comparison stays in float for float and double outputs alike.
REPRISE_HD float bernoulli_threshold(double p) {
  const float t = float(p);
  return double(t) > p ? std::nextafter(t, 0.0f) : t;
}

// One Bernoulli draw: true with probability p, for threshold = bernoulli_threshold(p).
REPRISE_HD bool bernoulli(uint32_t w, float threshold) { return uniform_float(w) <= threshold; }

// 32-bit words a fill of n elements reads; a random op reserves this many.
template <class T>
constexpr uint64_t uniform_words(uint64_t n) {
  return sizeof(T) == 4 ? n : 2 * n;
}
template <class T>
constexpr uint64_t normal_words(uint64_t n) {
  return (sizeof(T) == 4 ? 2 : 4) * ((n + 1) / 2);
}
constexpr uint64_t bernoulli_words(uint64_t n) { return n; }

}  // namespace reprise::rng
