#include "ops/compare.h"

#include <cmath>
#include <string>

#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "ops/check.h"

namespace reprise::ops {
namespace {

// x's dtype holding s, or an Error naming the op when it cannot hold it.
Tensor scalar_of(const char* op, const Tensor& x, double s) {
  REPRISE_CHECK(x.defined(), op, ": undefined tensor");
  if (x.dtype() == DType::boolean) {
    REPRISE_CHECK(s == 0 || s == 1, op, ": a bool tensor (", x.describe(),
                  ") compares with 0 or 1, got ", s);
  } else if (!is_floating(x.dtype())) {
    REPRISE_CHECK(std::isfinite(s) && s == std::trunc(s), op, ": an integer tensor (", x.describe(),
                  ") compares with an integral scalar, got ", s,
                  " (cast the tensor to a floating dtype first)");
  }
  return Tensor::full({}, s, x.dtype(), x.device());
}

void check_bool(const char* op, const Tensor& t) {
  REPRISE_CHECK(t.defined() && t.dtype() == DType::boolean, op, ": expected a bool tensor, got ",
                t.defined() ? t.describe() : "undefined");
}

// a and b broadcast to one shape, as views.
std::pair<Tensor, Tensor> broadcast(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device(op, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  NoGradGuard plumbing;
  return {a.expand(shape), b.expand(shape)};
}

}  // namespace

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const auto [x, y] = broadcast(compare_op_name(op), a, b);
  return backend_of(x).compare(op, x, y);
}

Tensor compare(CompareOp op, const Tensor& x, double s) {
  return compare(op, x, scalar_of(compare_op_name(op), x, s));
}

#define REPRISE_DEFINE_COMPARE(name, ...)                                                  \
  Tensor name(const Tensor& a, const Tensor& b) { return compare(CompareOp::name, a, b); } \
  Tensor name(const Tensor& x, double s) { return compare(CompareOp::name, x, s); }
REPRISE_COMPARE_OPS(REPRISE_DEFINE_COMPARE)
#undef REPRISE_DEFINE_COMPARE

Tensor isnan(const Tensor& x) { return ne(x, x); }

Tensor logical_not(const Tensor& a) {
  check_bool("logical_not", a);
  return eq(a, 0.0);
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_bool("logical_and", a);
  check_bool("logical_and", b);
  const auto [x, y] = broadcast("logical_and", a, b);
  return backend_of(x).where(x, y, x);  // a ? b : false
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_bool("logical_or", a);
  check_bool("logical_or", b);
  const auto [x, y] = broadcast("logical_or", a, b);
  return backend_of(x).where(x, x, y);  // a ? true : b
}

Tensor logical_xor(const Tensor& a, const Tensor& b) {
  check_bool("logical_xor", a);
  check_bool("logical_xor", b);
  return ne(a, b);
}

}  // namespace reprise::ops
