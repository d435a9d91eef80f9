// Binary elementwise ops. The backward of a broadcast sums the gradient
// back to each input's shape (detail::sum_to_shape).
#include "ops/binary.h"

#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/functors.h"
#include "ops/reduce.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

const autograd::OpInfo kAdd{"add"}, kSub{"sub"}, kMul{"mul"}, kDiv{"div"}, kAddScalar{"add_scalar"},
    kMulScalar{"mul_scalar"};

Tensor negate(const Tensor& g) { return detail::map("sub", g, fn::Neg{}); }

// Scales every element by s (a float kernel shared by the scalar ops).
Tensor scale(const char* op, const Tensor& x, double s) {
  return detail::map(op, x, [s](auto v) { return v * decltype(v)(s); });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("add", a, b);
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record_one({
      .op = kAdd,
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{detail::map2("add", in[0], in[1], fn::Add{})}; },
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
      .op = kSub,
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{detail::map2("sub", in[0], in[1], fn::Sub{})}; },
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
      .op = kMul,
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{detail::map2("mul", in[0], in[1], fn::Mul{})}; },
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensors grads(2);
            if (node.needs_input_grad(0)) {
              grads[0] = detail::sum_to_shape(
                  detail::map2("mul", g[0], node.saved_input(1), fn::Mul{}), sa);
            }
            if (node.needs_input_grad(1)) {
              grads[1] = detail::sum_to_shape(
                  detail::map2("mul", g[0], node.saved_input(0), fn::Mul{}), sb);
            }
            return grads;
          },
      .save = save,
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("div", a, b);
  Shape sa = a.shape(), sb = b.shape();
  // da = g / b; db = -g * y / b.
  autograd::SaveSpec save{.inputs = {1}};
  if (b.requires_grad()) save.outputs.push_back(0);
  return autograd::record_one({
      .op = kDiv,
      .inputs = {a, b},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{detail::map2("div", in[0], in[1], fn::Div{})}; },
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensor bv = node.saved_input(1);
            Tensor ga = detail::map2("div", g[0], bv, fn::Div{});
            Tensors grads{detail::sum_to_shape(ga, sa), Tensor()};
            if (node.needs_input_grad(1)) {
              Tensor gy = detail::map2(
                  "div", detail::map2("mul", g[0], node.saved_output(0), fn::Mul{}), bv, fn::Div{});
              grads[1] = detail::sum_to_shape(negate(gy), sb);
            }
            return grads;
          },
      .save = save,
  });
}

Tensor add(const Tensor& x, double s) {
  detail::check_float_cpu("add_scalar", x);
  return autograd::record_one({
      .op = kAddScalar,
      .inputs = {x},
      .forward =
          [s](const Tensors& in, auto*) {
            return Tensors{
                detail::map("add_scalar", in[0], [s](auto v) { return v + decltype(v)(s); })};
          },
      .backward = [](Node&, const Tensors& g) { return Tensors{g[0]}; },
  });
}

Tensor mul(const Tensor& x, double s) {
  detail::check_float_cpu("mul_scalar", x);
  return autograd::record_one({
      .op = kMulScalar,
      .inputs = {x},
      .forward = [s](const Tensors& in, auto*) { return Tensors{scale("mul_scalar", in[0], s)}; },
      .backward = [s](Node&, const Tensors& g) { return Tensors{scale("mul_scalar", g[0], s)}; },
  });
}

}  // namespace reprise::ops
