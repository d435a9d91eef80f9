#pragma once
// 16-bit floating types stored as raw bits. Conversion from float rounds to
// nearest, ties to even; NaN stays NaN (quiet). Arithmetic goes through float.

#include <bit>
#include <cstdint>
#include <type_traits>

#include "base/hd.h"

namespace reprise {

namespace detail {
REPRISE_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}
REPRISE_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}
}  // namespace detail

// bfloat16: the upper 16 bits of an IEEE float32.
struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  REPRISE_HD explicit bfloat16(float f) : bits(from_float(f)) {}
  REPRISE_HD explicit operator float() const { return detail::bits_float(uint32_t(bits) << 16); }

  static REPRISE_HD uint16_t from_float(float f) {
    uint32_t u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);                             // ties to even
    return uint16_t((u + rounding) >> 16);
  }
  static REPRISE_HD bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits.
struct float16 {
  uint16_t bits = 0;

  float16() = default;
  REPRISE_HD explicit float16(float f) : bits(from_float(f)) {}
  REPRISE_HD explicit operator float() const { return to_float(bits); }

  static REPRISE_HD uint16_t from_float(float f) {
    uint32_t u = detail::float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
    if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to or past infinity
    if (abs >= 0x38800000u) {                                 // normal half
      uint32_t rounding = 0xfffu + ((abs >> 13) & 1u);
      return uint16_t(sign | ((abs - 0x38000000u + rounding) >> 13));
    }
    // Subnormal half (or zero): value = abs_float * 2^24 rounded to an integer.
    if (abs < 0x33000000u) return uint16_t(sign);  // below half the smallest subnormal
    uint32_t exponent = abs >> 23;
    uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;  // 14..24 for this range
    uint32_t half_ulp = 1u << (shift - 1);
    uint32_t result = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    if (rest > half_ulp || (rest == half_ulp && (result & 1u))) ++result;
    return uint16_t(sign | result);
  }
  static REPRISE_HD float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent != 0)
      return detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0) return detail::bits_float(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    return detail::bits_float(sign | ((112u - uint32_t(e)) << 23) | ((mantissa & 0x3ffu) << 13));
  }
  static REPRISE_HD float16 from_bits(uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

// Whether T is bf16 or f16: a 16-bit storage type whose arithmetic goes
// through float (is_16bit_float for a runtime DType).
template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

// The type a stored T computes in: float for the 16-bit types, T otherwise
// (compute_dtype for a runtime DType).
template <class T>
using ComputeType = std::conditional_t<is_16bit_float_v<T>, float, T>;

}  // namespace reprise
