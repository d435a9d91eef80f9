#pragma once
// Element types and the dispatch helpers that turn a runtime DType into a
// C++ type for a kernel.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "engine/half.h"

namespace reprise {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, boolean };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);
// bf16 or f16: storage types whose arithmetic goes through f32.
bool is_16bit_float(DType t);
// The dtype t's arithmetic runs in: f32 for the 16-bit floats, t otherwise.
DType compute_dtype(DType t);
std::string to_string(DType t);

// Maps a C++ element type to its DType.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}

// dispatch_all(dtype, op, f) calls f.template operator()<T>() for the C++
// type T of dtype. The other helpers restrict the set and raise an Error
// naming the op and the dtype when it is not supported.
template <class F>
decltype(auto) dispatch_all(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    case DType::bf16:
      return f.template operator()<bfloat16>();
    case DType::f16:
      return f.template operator()<float16>();
    case DType::i32:
      return f.template operator()<int32_t>();
    case DType::i64:
      return f.template operator()<int64_t>();
    case DType::boolean:
      return f.template operator()<bool>();
  }
  REPRISE_FAIL(op, ": unknown dtype");
}

// f32 and f64: the types that every differentiable op computes in.
template <class F>
decltype(auto) dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    default:
      break;
  }
  REPRISE_FAIL(op, ": expected a tensor of dtype f32 or f64, got ", dtype_name(t),
               " (cast it with ops::cast first)");
}

// f32, f64 and bf16: the ops that also keep bf16 activations (swiglu)
// compute a bf16 tensor's values in f32 and round each result once.
template <class F>
decltype(auto) dispatch_float_or_bf16(DType t, const char* op, F&& f) {
  if (t == DType::bf16) return f.template operator()<bfloat16>();
  return dispatch_float(t, op, std::forward<F>(f));
}

// f32, f64, bf16, f16: every floating type (storage; 16-bit values compute
// through float).
template <class F>
decltype(auto) dispatch_any_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    case DType::bf16:
      return f.template operator()<bfloat16>();
    case DType::f16:
      return f.template operator()<float16>();
    default:
      break;
  }
  REPRISE_FAIL(op, ": expected a tensor of dtype f32, f64, bf16 or f16, got ", dtype_name(t));
}

// f32, f64, i32, i64: arithmetic types.
template <class F>
decltype(auto) dispatch_arith(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32:
      return f.template operator()<float>();
    case DType::f64:
      return f.template operator()<double>();
    case DType::i32:
      return f.template operator()<int32_t>();
    case DType::i64:
      return f.template operator()<int64_t>();
    default:
      break;
  }
  REPRISE_FAIL(op, ": expected a tensor of dtype f32, f64, i32 or i64, got ", dtype_name(t));
}

// i32 and i64: index types.
template <class F>
decltype(auto) dispatch_index(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::i32:
      return f.template operator()<int32_t>();
    case DType::i64:
      return f.template operator()<int64_t>();
    default:
      break;
  }
  REPRISE_FAIL(op, ": expected an index tensor of dtype i32 or i64, got ", dtype_name(t));
}

namespace detail {

// Rounds to f32 "to odd": truncate, and set the last mantissa bit when the
// result is inexact. A second round-to-nearest-even into a format with at
// least two fewer mantissa bits (bf16: 8, f16: 11, f32: 24) then gives the
// correctly rounded result (Boldo and Melquiond, "Emulation of FMA and
// correctly rounded sums: proved algorithms using rounding to odd", 2008),
// where rounding to the nearest f32 first can land on a 16-bit tie and then
// round the wrong way.
REPRISE_HD float to_float_odd(double v) {
  const float f = static_cast<float>(v);  // nearest; inf past the f32 range
  if (v != v || double(f) == v) return f;
  uint32_t bits = float_bits(f);
  if ((f < 0 ? -double(f) : double(f)) > (v < 0 ? -v : v)) --bits;  // one step toward zero
  return bits_float(bits | 1u);
}

// The same for an integer: keep the top 24 significant bits, OR the
// dropped bits into the last one.
REPRISE_HD float to_float_odd(int64_t v) {
  const uint64_t a = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  int shift = 0;
  while ((a >> shift) >= (uint64_t(1) << 24)) ++shift;
  uint64_t m = a >> shift;
  if ((a & ((uint64_t(1) << shift) - 1)) != 0) m |= 1u;
  const float f = float(m) * bits_float(uint32_t(127 + shift) << 23);  // exact: m < 2^24
  return v < 0 ? -f : f;
}

}  // namespace detail

// Converts between any two element types, rounding to nearest even once.
// 16-bit floats widen exactly through float; f64 and integers narrow to
// them through detail::to_float_odd, not through the nearest float.
template <class To, class From>
REPRISE_HD To convert(From v) {
  constexpr bool kFromHalf = is_16bit_float_v<From>;
  constexpr bool kToHalf = is_16bit_float_v<To>;
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (kFromHalf) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (kToHalf && std::is_same_v<From, double>) {
    return To(detail::to_float_odd(v));
  } else if constexpr (kToHalf && std::is_integral_v<From> && !std::is_same_v<From, bool>) {
    return To(detail::to_float_odd(int64_t(v)));
  } else if constexpr (kToHalf) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

// Whether v converts to the integer type To (i32 or i64) without undefined
// behaviour or wrap-around; floats truncate toward zero first. The CPU and
// CUDA backends' `representable` test each element with it.
template <class To, class From>
REPRISE_HD bool fits(From v) {
  if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, int32_t>) {
    return v >= -2147483648ll && v <= 2147483647ll;
  } else if constexpr (std::is_integral_v<From>) {
    return true;  // bool, i32, or i64 to i64
  } else {
    const double d = convert<double>(v);  // NaN fails both comparisons
    if constexpr (std::is_same_v<To, int32_t>) {
      return d > -0x1p31 - 1 && d < 0x1p31;
    } else {
      return d >= -0x1p63 && d < 0x1p63;
    }
  }
}

}  // namespace reprise
