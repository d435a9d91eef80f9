// SwiGLU forward and backward, each one pass over the elements:
//   y     = s * u,                     s = silu(g) = g * sigmoid(g)
//   dg    = fn::SiluGrad(g, dy * u)    (silu's rule on the gradient of s)
//   du    = dy * s
// with the same functors, in the same order, as silu followed by mul, so
// the bits match the two-op form.
#include "ops/swiglu.h"

#include "autograd/tape.h"
#include "engine/strided_loop.h"
#include "ops/elementwise.h"
#include "ops/functors.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

constexpr const char* kName = "swiglu";

// The sigmoid's exp, its divide and the gating multiply: 4 per element.
double swiglu_flops(const Tensors& in, const Tensors&) { return 4.0 * double(in[0].numel()); }

const autograd::OpInfo kSwiglu{kName, false, swiglu_flops};

struct SwigluFn {
  template <class T>
  REPRISE_HD T operator()(T g, T u) const {
    return fn::Silu{}(g)*u;
  }
};

// (dg, du) from gate, up and dy, all of one shape (any strides).
Tensors swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy) {
  Tensor dg = Tensor::empty(dy.shape(), dy.dtype()), du = Tensor::empty(dy.shape(), dy.dtype());
  dispatch_float(dy.dtype(), kName, [&]<class T>() {
    T* pdg = dg.data<T>();
    T* pdu = du.data<T>();
    const T* pg = gate.data<T>();
    const T* pu = up.data<T>();
    const T* pdy = dy.data<T>();
    for_each_run<5>(dy.shape(),
                    {dg.strides(), du.strides(), gate.strides(), up.strides(), dy.strides()},
                    [&](auto off, int64_t n, auto st) {
                      T* a = pdg + off[0];
                      T* b = pdu + off[1];
                      const T* g = pg + off[2];
                      const T* u = pu + off[3];
                      const T* d = pdy + off[4];
                      auto step = [&](int64_t j, int64_t jg, int64_t ju, int64_t jd) {
                        const T ds = d[jd] * u[ju];
                        a[j] = fn::SiluGrad{}(g[jg], g[jg], ds);
                        b[j] = d[jd] * fn::Silu{}(g[jg]);
                      };
                      if (st[2] == 1 && st[3] == 1 && st[4] == 1) {
                        for (int64_t j = 0; j < n; ++j) step(j, j, j, j);
                      } else {
                        for (int64_t j = 0; j < n; ++j) step(j, j * st[2], j * st[3], j * st[4]);
                      }
                    });
  });
  return {dg, du};
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  detail::check_float_cpu(kName, gate);
  detail::check_same_dtype_device(kName, gate, up);
  REPRISE_CHECK(gate.shape() == up.shape(), kName, ": gate ", gate.describe(), " and up ",
                up.describe(), " must have the same shape");
  return autograd::record_one({
      .op = kSwiglu,
      .inputs = {gate, up},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{detail::map2(kName, in[0], in[1], SwigluFn{})}; },
      .backward =
          [](Node& node, const Tensors& g) {
            return swiglu_backward(node.saved_input(0), node.saved_input(1), g[0]);
          },
      .save = {.inputs = {0, 1}},
  });
}

}  // namespace reprise::ops
