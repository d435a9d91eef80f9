#include "ops/views.h"

#include "autograd/tape.h"
#include "ops/reduce.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// A layout op: forward is a view function, backward is given.
template <class Fwd, class Bwd>
Tensor layout_op(const autograd::OpInfo& op, const Tensor& x, Fwd fwd, Bwd bwd) {
  REPRISE_CHECK(x.defined(), op.name, ": undefined input");
  return autograd::record_one({
      .op = op,
      .inputs = {x},
      .forward = [fwd](const Tensors& in, auto*) { return Tensors{fwd(in[0])}; },
      .backward = [bwd](Node&, const Tensors& g) { return Tensors{bwd(g[0])}; },
  });
}

}  // namespace

Tensor reshape(const Tensor& x, Shape shape) {
  Shape in = x.shape();
  return layout_op(
      registry::kReshape, x, [shape](const Tensor& t) { return t.reshape(shape); },
      [in](const Tensor& g) { return g.reshape(in); });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return layout_op(
      registry::kTranspose, x, [=](const Tensor& t) { return t.transpose(d0, d1); },
      [=](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = x.permute(dims);  // validates dims before recording
  }
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[size_t(wrap_dim(dims[i], x.dim(), "permute"))] = int64_t(i);
  return layout_op(
      registry::kPermute, x, [dims](const Tensor& t) { return t.permute(dims); },
      [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Shape in = x.shape();
  DType dtype = x.dtype();
  return layout_op(
      registry::kSlice, x, [=](const Tensor& t) { return t.slice(dim, start, end, step); },
      [=](const Tensor& g) {
        Tensor dx = Tensor::zeros(in, dtype, g.device());
        Tensor window = dx.slice(dim, start, end, step);
        window.copy_(g);
        return dx;
      });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  Shape in = x.shape();
  return layout_op(
      registry::kExpand, x, [shape](const Tensor& t) { return t.expand(shape); },
      [in](const Tensor& g) { return detail::sum_to_shape(g, in); });
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  Shape in = x.shape();
  return layout_op(
      registry::kSqueeze, x, [dim](const Tensor& t) { return t.squeeze(dim); },
      [in](const Tensor& g) { return g.reshape(in); });
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  Shape in = x.shape();
  return layout_op(
      registry::kUnsqueeze, x, [dim](const Tensor& t) { return t.unsqueeze(dim); },
      [in](const Tensor& g) { return g.reshape(in); });
}

Tensor contiguous(const Tensor& x) {
  return layout_op(
      registry::kContiguous, x, [](const Tensor& t) { return t.contiguous(); },
      [](const Tensor& g) { return g; });
}

}  // namespace reprise::ops
