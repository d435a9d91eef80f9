// cast: forward, backward rule (cast the gradient back) and checks.
//
// The conversion is Tensor::copy_ (engine/dtype.h convert: one rounding to
// nearest even, also from f64 and integers to bf16/f16). One case needs more
// to avoid a silent wrong answer: floats or i64 going to a narrower integer,
// where a static_cast of an unrepresentable value is undefined or wraps, so
// those are checked first.
#include "ops/cast.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Raises when some element of x is not representable in the integer dtype
// `to`, naming the first such value (found on the host by bisection).
void check_representable(const Tensor& x, DType to) {
  if (to != DType::i32 && to != DType::i64) return;
  if (backend_of(x).representable(x, to)) return;
  const Tensor flat = x.to(Device::cpu()).reshape({-1});
  int64_t lo = 0, hi = flat.numel();  // [lo, hi) holds the first value that does not fit
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (backend_of(flat).representable(flat.slice(0, lo, mid), to)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const Tensor v = flat.select(0, lo);
  if (is_floating(x.dtype())) {
    REPRISE_FAIL("cast: value ", v.item<double>(), " of ", x.describe(),
                 " is not representable in ", dtype_name(to), " (NaN, inf or outside its range)");
  }
  REPRISE_FAIL("cast: value ", v.item<int64_t>(), " of ", x.describe(), " is outside the range of ",
               dtype_name(to));
}

Tensor cast_kernel(const Tensor& x, DType to) {
  if (to == x.dtype()) return x;
  check_representable(x, to);
  Tensor out = Tensor::empty(x.shape(), to, x.device());
  out.copy_(x);
  return out;
}

}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  REPRISE_CHECK(x.defined(), "cast: undefined input");
  const DType from = x.dtype();
  return autograd::record_one({
      .op = registry::kCast,
      .inputs = {x},
      .forward = [dtype](const Tensors& in, auto*) { return Tensors{cast_kernel(in[0], dtype)}; },
      // Runs only between floating dtypes: integer and bool outputs carry no
      // gradient, and integer inputs cannot require one.
      .backward = [from](Node&, const Tensors& g) { return Tensors{cast_kernel(g[0], from)}; },
  });
}

}  // namespace reprise::ops
