#include "engine/accumulate.h"

#include "engine/backend.h"

namespace reprise {
namespace {
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.device() == b.device(), op,
                ": expected tensors of one shape, dtype and device, got ", a.describe(), " and ",
                b.describe());
}
}  // namespace

void accumulate_(Tensor& dst, const Tensor& src) {
  check_pair("accumulate_", dst, src);
  backend(dst.device()).binary(BinaryOp::add, dst, dst, src);
  dst.storage()->bump_version();
}

Tensor sum_of(const Tensor& a, const Tensor& b) {
  check_pair("sum_of", a, b);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  backend(a.device()).binary(BinaryOp::add, out, a, b);
  return out;
}

}  // namespace reprise
