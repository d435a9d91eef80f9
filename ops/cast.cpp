// cast: forward kernel, backward rule (cast the gradient back) and OpInfo.
//
// The conversion is Tensor::copy_ (engine/dtype.h convert: one rounding to
// nearest even, also from f64 and integers to bf16/f16). One case needs more
// to avoid a silent wrong answer: floats or i64 going to a narrower integer,
// where a static_cast of an unrepresentable value is undefined or wraps, so
// those are checked first.
#include "ops/cast.h"

#include <atomic>
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
  out.copy_(x);
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
