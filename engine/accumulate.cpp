#include "engine/accumulate.h"

#include "engine/backend.h"

namespace reprise {
namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.device() == b.device(), op,
                ": expected tensors of one shape, dtype and device, got ", a.describe(), " and ",
                b.describe());
}

// out = a + b. The backends add f32, f64 and integers; 16-bit floats (the
// gradients of a mixed-precision model's bf16 operands) widen to f32
// exactly, add there and round once to out's dtype, as PyTorch's CPU
// kernels do.
void add_into(const Tensor& out, const Tensor& a, const Tensor& b) {
  Backend& be = backend(out.device());
  if (!is_16bit_float(out.dtype())) {
    be.binary(BinaryOp::add, out, a, b);
    return;
  }
  Tensor sum = a.to(DType::f32);
  be.binary(BinaryOp::add, sum, sum, b.to(DType::f32));
  be.copy(out, sum);
}

}  // namespace

void accumulate_(Tensor& dst, const Tensor& src) {
  check_pair("accumulate_", dst, src);
  add_into(dst, dst, src);
  dst.storage()->bump_version();
}

Tensor sum_of(const Tensor& a, const Tensor& b) {
  check_pair("sum_of", a, b);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  add_into(out, a, b);
  return out;
}

}  // namespace reprise
