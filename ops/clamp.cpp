#include "ops/clamp.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/reduce.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// x limited by whichever bounds are defined, all three of x's shape.
Tensor clamp_kernel(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  Backend& be = backend_of(x);
  Tensor y = x.clone();  // contiguous, ours to write
  if (lo.defined()) be.binary(BinaryOp::maximum, y, y, lo);
  if (hi.defined()) be.binary(BinaryOp::minimum, y, y, hi);
  return y;
}

}  // namespace

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  REPRISE_CHECK(x.defined(), "clamp: undefined x");
  REPRISE_CHECK(min.defined() || max.defined(), "clamp: ", x.describe(),
                " with neither min nor max (give at least one)");
  REPRISE_CHECK(x.dtype() != DType::boolean, "clamp: expected a numeric tensor, got ",
                x.describe());
  Shape shape = x.shape();
  for (const Tensor& bound : {min, max}) {
    if (!bound.defined()) continue;
    detail::check_same_dtype_device("clamp", x, bound);
    REPRISE_CHECK(broadcast_shapes(x.shape(), bound.shape(), "clamp") == x.shape(),
                  "clamp: a bound ", bound.describe(), " broadcasts x ", x.describe(),
                  " to another shape; it must broadcast to x's");
  }
  const Shape smin = min.defined() ? min.shape() : Shape{};
  const Shape smax = max.defined() ? max.shape() : Shape{};
  const bool has_min = min.defined(), has_max = max.defined();
  autograd::SaveSpec save{.inputs = {0}};
  if (has_min) save.inputs.push_back(1);
  if (has_max) save.inputs.push_back(2);
  return autograd::record_one({
      .op = registry::kClamp,
      .inputs = {x, min, max},
      .forward =
          [shape](const Tensors& in, auto*) {
            NoGradGuard plumbing;
            const auto view = [&](const Tensor& t) { return t.defined() ? t.expand(shape) : t; };
            return Tensors{clamp_kernel(in[0], view(in[1]), view(in[2]))};
          },
      // torch's masks: x takes g where min <= x <= max, min where x < min,
      // max where x > max (both bounds where min > max puts x between).
      .backward =
          [shape, smin, smax, has_min, has_max](Node& node, const Tensors& g) {
            Backend& be = backend_of(g[0]);
            const Tensor x = node.saved_input(0);
            const auto view = [&](const Tensor& t) { return t.expand(shape); };
            const Tensor zero = view(Tensor::zeros({}, g[0].dtype(), g[0].device()));
            const auto only = [&](const Tensor& mask) { return be.where(mask, g[0], zero); };
            Tensor kept;  // where x came through
            const auto narrow = [&](const Tensor& mask) {
              kept = kept.defined() ? be.where(kept, mask, kept) : mask;
            };
            Tensors grads(3);
            if (has_min) {
              const Tensor lo = node.saved_input(1);
              narrow(be.compare(CompareOp::ge, x, view(lo)));
              if (node.needs_input_grad(1))
                grads[1] = detail::sum_to_shape(only(be.compare(CompareOp::lt, x, view(lo))), smin);
            }
            if (has_max) {
              const Tensor hi = node.saved_input(2);
              narrow(be.compare(CompareOp::le, x, view(hi)));
              if (node.needs_input_grad(2))
                grads[2] = detail::sum_to_shape(only(be.compare(CompareOp::gt, x, view(hi))), smax);
            }
            if (node.needs_input_grad(0)) grads[0] = only(kept);
            return grads;
          },
      .save = save,
  });
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  REPRISE_CHECK(x.defined(), "clamp: undefined x");
  const auto bound = [&](std::optional<double> v) {
    return v ? Tensor::full({}, *v, x.dtype(), x.device()) : Tensor();
  };
  return clamp(x, bound(min), bound(max));
}

}  // namespace reprise::ops
