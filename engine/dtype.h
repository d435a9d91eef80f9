#pragma once
// Element types and the dispatch helpers that turn a runtime DType into a
// C++ type for a kernel.

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "engine/half.h"

namespace reprise {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, boolean };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);
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

// Converts between any two element types; 16-bit floats go through float.
template <class To, class From>
REPRISE_HD To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, bfloat16> || std::is_same_v<From, float16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bfloat16> || std::is_same_v<To, float16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace reprise
