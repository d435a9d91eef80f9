#include "ops/elementwise.h"

namespace reprise::ops::detail {

void check_same_dtype_device(const char* op, const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.defined() && b.defined(), op, ": undefined input");
  REPRISE_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch: ", a.describe(), " vs ",
                b.describe(), " (expected one dtype)");
  REPRISE_CHECK(a.device() == b.device(), op, ": device mismatch: ", a.describe(), " vs ",
                b.describe(), " (expected one device)");
  REPRISE_CHECK(a.device().is_cpu(), op, ": ", a.describe(), ": no kernel for this device");
}

void check_float_cpu(const char* op, const Tensor& t) {
  REPRISE_CHECK(t.defined(), op, ": undefined input");
  REPRISE_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op,
                ": expected a tensor of dtype f32 or f64, got ", t.describe());
  REPRISE_CHECK(t.device().is_cpu(), op, ": ", t.describe(), ": no kernel for this device");
}

}  // namespace reprise::ops::detail
