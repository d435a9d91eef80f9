// cast: forward kernel, backward rule (cast the gradient back) and OpInfo.
//
// Most conversions are Tensor::copy_ (engine/dtype.h convert: one rounding
// to nearest even through half.h). Two cases need more to avoid a silent
// wrong answer: sources wider than f32 (f64, i32, i64) going to bf16/f16,
// which copy_ would round twice (to f32, then to 16 bits), and floats or
// i64 going to a narrower integer, where a static_cast of an
// unrepresentable value is undefined or wraps.
#include "ops/cast.h"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "autograd/tape.h"
#include "engine/strided_loop.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

double no_flops(const Tensors&, const Tensors&) { return 0; }
const autograd::OpInfo kCast{"cast", false, no_flops};

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// Rounds to f32 "to odd": truncate, and set the last mantissa bit when the
// result is inexact. A second round-to-nearest-even into a format with at
// least two fewer mantissa bits (bf16: 8, f16: 11, f32: 24) then gives the
// correctly rounded result (Boldo and Melquiond, "Emulation of FMA and
// correctly rounded sums: proved algorithms using rounding to odd", 2008).
float to_float_odd(double v) {
  float f = static_cast<float>(v);  // nearest; inf past the f32 range
  if (std::isnan(v) || double(f) == v) return f;
  if (std::abs(double(f)) > std::abs(v)) f = std::nextafter(f, 0.0f);  // toward zero
  return detail::bits_float(detail::float_bits(f) | 1u);
}

// The same for an integer: keep the top 24 significant bits, OR the
// dropped bits into the last one.
float to_float_odd(int64_t v) {
  const uint64_t a = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  const int shift = std::max(0, int(std::bit_width(a)) - 24);
  uint64_t m = a >> shift;
  if (shift > 0 && (a & ((uint64_t(1) << shift) - 1)) != 0) m |= 1u;
  const float f = std::ldexp(float(m), shift);  // exact: m has at most 24 bits
  return v < 0 ? -f : f;
}

// out = x rounded once to the 16-bit type To; From is f64, i32 or i64.
template <class To, class From>
void round_once(const Tensor& x, const Tensor& out) {
  const From* in = x.data<From>();
  To* o = out.data<To>();
  for_each_run<2>(x.shape(), {out.strides(), x.strides()}, [&](auto off, int64_t n, auto st) {
    for (int64_t j = 0; j < n; ++j) {
      const From v = in[off[1] + j * st[1]];
      if constexpr (std::is_floating_point_v<From>) {
        o[off[0] + j * st[0]] = To(to_float_odd(double(v)));
      } else {
        o[off[0] + j * st[0]] = To(to_float_odd(int64_t(v)));
      }
    }
  });
}

template <class To>
void round_once_from(const Tensor& x, const Tensor& out) {
  switch (x.dtype()) {
    case DType::f64:
      return round_once<To, double>(x, out);
    case DType::i32:
      return round_once<To, int32_t>(x, out);
    default:
      return round_once<To, int64_t>(x, out);
  }
}

// Whether v converts to the integer type To without undefined behaviour
// or wrap-around (floats truncate toward zero first).
template <class To, class From>
bool fits(From v) {
  if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, int32_t>) {
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
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

// Raises when some element of x is not representable in the integer dtype
// `to`, naming the first such value.
void check_representable(const Tensor& x, DType to) {
  if (to != DType::i32 && to != DType::i64) return;
  dispatch_all(x.dtype(), "cast", [&]<class From>() {
    dispatch_index(to, "cast", [&]<class To>() {
      const From* p = x.data<From>();
      std::atomic<bool> bad{false};
      for_each_run<1>(x.shape(), {x.strides()}, [&](auto off, int64_t n, auto st) {
        bool any = false;
        for (int64_t j = 0; j < n; ++j) any = any || !fits<To>(p[off[0] + j * st[0]]);
        if (any) bad.store(true, std::memory_order_relaxed);
      });
      if (!bad.load()) return;
      for (From v : x.to_vector<From>()) {
        if (fits<To>(v)) continue;
        if constexpr (std::is_integral_v<From>) {
          REPRISE_FAIL("cast: value ", int64_t(v), " of ", x.describe(),
                       " is outside the range of ", dtype_name(to));
        } else {
          REPRISE_FAIL("cast: value ", convert<double>(v), " of ", x.describe(),
                       " is not representable in ", dtype_name(to),
                       " (NaN, inf or outside its range)");
        }
      }
    });
  });
}

Tensor cast_kernel(const Tensor& x, DType to) {
  if (to == x.dtype()) return x;
  check_representable(x, to);
  Tensor out = Tensor::empty(x.shape(), to);
  const DType from = x.dtype();
  if (is_half(to) && (from == DType::f64 || from == DType::i32 || from == DType::i64)) {
    if (to == DType::bf16) {
      round_once_from<bfloat16>(x, out);
    } else {
      round_once_from<float16>(x, out);
    }
  } else {
    out.copy_(x);
  }
  return out;
}

}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  REPRISE_CHECK(x.defined(), "cast: undefined input");
  REPRISE_CHECK(x.device().is_cpu(), "cast: ", x.describe(), " to ", dtype_name(dtype),
                ": no kernel for this device");
  const DType from = x.dtype();
  return autograd::record_one({
      .op = kCast,
      .inputs = {x},
      .forward = [dtype](const Tensors& in, auto*) { return Tensors{cast_kernel(in[0], dtype)}; },
      // Runs only between floating dtypes: integer and bool outputs carry no
      // gradient, and integer inputs cannot require one.
      .backward = [from](Node&, const Tensors& g) { return Tensors{cast_kernel(g[0], from)}; },
  });
}

}  // namespace reprise::ops
