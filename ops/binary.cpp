// Binary elementwise ops. Operands broadcast as in numpy; the backward of a
// broadcast sums the gradient back to each input's shape
// (detail::sum_to_shape).
#include "ops/binary.h"

#include <cmath>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/cast.h"
#include "ops/check.h"
#include "ops/reduce.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// a op b with numpy broadcasting, into a new contiguous tensor.
Tensor apply(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device(name, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  NoGradGuard no_grad;  // expand is plumbing here
  backend_of(a).binary(op, out, a.expand(shape), b.expand(shape));
  return out;
}

Tensor negate(const Tensor& g) { return backend_of(g).unary(UnaryOp::neg, 0, g); }
Tensor scale(const Tensor& x, double s) { return backend_of(x).unary(UnaryOp::mul_scalar, s, x); }

// An i32/i64 tensor with a scalar, as torch has it: an integral scalar
// keeps the dtype (the tensor-tensor kernel, s broadcast), another one
// promotes x to f32.
Tensor integer_with_scalar(const char* name, const Tensor& x, double s,
                           Tensor (*tensor_op)(const Tensor&, const Tensor&),
                           Tensor (*scalar_op)(const Tensor&, double)) {
  if (s != std::trunc(s)) return scalar_op(cast(x, DType::f32), s);
  REPRISE_CHECK(std::abs(s) < 0x1p63, name, ": scalar ", s, " is outside the range of ",
                x.describe());
  return tensor_op(x, Tensor::full({}, s, x.dtype(), x.device()));
}

bool is_integer(const Tensor& x) {
  return x.defined() && (x.dtype() == DType::i32 || x.dtype() == DType::i64);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("add", a, b);
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record_one({
      .op = registry::of(BinaryOp::add),
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{apply(BinaryOp::add, "add", in[0], in[1])}; },
      .backward =
          [sa, sb](Node&, const Tensors& g) {
            return Tensors{detail::sum_to_shape(g[0], sa), detail::sum_to_shape(g[0], sb)};
          },
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("sub", a, b);
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record_one({
      .op = registry::of(BinaryOp::sub),
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{apply(BinaryOp::sub, "sub", in[0], in[1])}; },
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensor gb =
                node.needs_input_grad(1) ? detail::sum_to_shape(negate(g[0]), sb) : Tensor();
            return Tensors{detail::sum_to_shape(g[0], sa), gb};
          },
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("mul", a, b);
  Shape sa = a.shape(), sb = b.shape();
  // da needs b and db needs a: keep only what a needed gradient reads.
  autograd::SaveSpec save;
  if (b.requires_grad()) save.inputs.push_back(0);
  if (a.requires_grad()) save.inputs.push_back(1);
  return autograd::record_one({
      .op = registry::of(BinaryOp::mul),
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{apply(BinaryOp::mul, "mul", in[0], in[1])}; },
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensors grads(2);
            if (node.needs_input_grad(0)) {
              grads[0] =
                  detail::sum_to_shape(apply(BinaryOp::mul, "mul", g[0], node.saved_input(1)), sa);
            }
            if (node.needs_input_grad(1)) {
              grads[1] =
                  detail::sum_to_shape(apply(BinaryOp::mul, "mul", g[0], node.saved_input(0)), sb);
            }
            return grads;
          },
      .save = save,
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("div", a, b);
  // True division, as torch's: integers divide as f32.
  if (is_integer(a)) return div(cast(a, DType::f32), cast(b, DType::f32));
  Shape sa = a.shape(), sb = b.shape();
  // da = g / b; db = -g * y / b.
  autograd::SaveSpec save{.inputs = {1}};
  if (b.requires_grad()) save.outputs.push_back(0);
  return autograd::record_one({
      .op = registry::of(BinaryOp::div),
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{apply(BinaryOp::div, "div", in[0], in[1])}; },
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            const Tensor bv = node.saved_input(1);
            Tensors grads{detail::sum_to_shape(apply(BinaryOp::div, "div", g[0], bv), sa),
                          Tensor()};
            if (node.needs_input_grad(1)) {
              const Tensor gy = apply(BinaryOp::div, "div",
                                      apply(BinaryOp::mul, "div", g[0], node.saved_output(0)), bv);
              grads[1] = detail::sum_to_shape(negate(gy), sb);
            }
            return grads;
          },
      .save = save,
  });
}

namespace {

// maximum (kind = maximum) or minimum: the winner takes g, a tie half of g
// each, a NaN nothing. a and b keep their shapes; g has the broadcast one.
Tensors extreme_backward(BinaryOp kind, Node& node, const Tensor& g, const Shape& sa,
                         const Shape& sb) {
  const Tensor a = node.saved_input(0).expand(g.shape()), b = node.saved_input(1).expand(g.shape());
  Backend& be = backend_of(g);
  const Tensor zero = Tensor::zeros({}, g.dtype(), g.device()).expand(g.shape());
  const Tensor tie = be.where(be.compare(CompareOp::eq, a, b), scale(g, 0.5), zero);
  const CompareOp a_wins = kind == BinaryOp::maximum ? CompareOp::gt : CompareOp::lt;
  const CompareOp b_wins = kind == BinaryOp::maximum ? CompareOp::lt : CompareOp::gt;
  Tensors grads(2);
  if (node.needs_input_grad(0))
    grads[0] = detail::sum_to_shape(be.where(be.compare(a_wins, a, b), g, tie), sa);
  if (node.needs_input_grad(1))
    grads[1] = detail::sum_to_shape(be.where(be.compare(b_wins, a, b), g, tie), sb);
  return grads;
}

Tensor extreme(BinaryOp kind, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(kind);
  detail::check_same_dtype_device(name, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record_one({
      .op = registry::of(kind),
      .inputs = {a, b},
      .forward = [kind, name](const Tensors& in,
                              auto*) { return Tensors{apply(kind, name, in[0], in[1])}; },
      .backward = [kind, sa, sb](
                      Node& node,
                      const Tensors& g) { return extreme_backward(kind, node, g[0], sa, sb); },
      .save = {.inputs = {0, 1}},
  });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extreme(BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extreme(BinaryOp::minimum, a, b); }

Tensor add(const Tensor& x, double s) {
  if (is_integer(x)) return integer_with_scalar("add_scalar", x, s, &add, &add);
  detail::check_float("add_scalar", x);
  return autograd::record_one({
      .op = registry::of(UnaryOp::add_scalar),
      .inputs = {x},
      .forward =
          [s](const Tensors& in, auto*) {
            return Tensors{backend_of(in[0]).unary(UnaryOp::add_scalar, s, in[0])};
          },
      .backward = [](Node&, const Tensors& g) { return Tensors{g[0]}; },
  });
}

Tensor mul(const Tensor& x, double s) {
  if (is_integer(x)) return integer_with_scalar("mul_scalar", x, s, &mul, &mul);
  detail::check_float("mul_scalar", x);
  return autograd::record_one({
      .op = registry::of(UnaryOp::mul_scalar),
      .inputs = {x},
      .forward = [s](const Tensors& in, auto*) { return Tensors{scale(in[0], s)}; },
      .backward = [s](Node&, const Tensors& g) { return Tensors{scale(g[0], s)}; },
  });
}

}  // namespace reprise::ops
