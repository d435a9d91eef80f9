#include "engine/accumulate.h"

#include "engine/strided_loop.h"

namespace reprise {
namespace {
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.device() == b.device(), op,
                ": expected tensors of one shape, dtype and device, got ", a.describe(), " and ",
                b.describe());
  REPRISE_CHECK(a.device().is_cpu(), op, ": only cpu tensors here, got ", a.describe());
}

// out = a + b over three operands with their own strides.
void add_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_float(out.dtype(), "accumulate", [&]<class T>() {
    T* o = static_cast<T*>(out.raw_data());
    const T* x = static_cast<const T*>(a.raw_data());
    const T* y = static_cast<const T*>(b.raw_data());
    for_each_run<3>(out.shape(), {out.strides(), a.strides(), b.strides()},
                    [&](auto off, int64_t n, auto st) {
                      T* po = o + off[0];
                      const T* px = x + off[1];
                      const T* py = y + off[2];
                      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                        for (int64_t i = 0; i < n; ++i) po[i] = px[i] + py[i];
                      } else {
                        for (int64_t i = 0; i < n; ++i)
                          po[i * st[0]] = px[i * st[1]] + py[i * st[2]];
                      }
                    });
  });
}
}  // namespace

void accumulate_(Tensor& dst, const Tensor& src) {
  check_pair("accumulate_", dst, src);
  add_kernel(dst, dst, src);
  dst.storage()->bump_version();
}

Tensor sum_of(const Tensor& a, const Tensor& b) {
  check_pair("sum_of", a, b);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  add_kernel(out, a, b);
  return out;
}

}  // namespace reprise
