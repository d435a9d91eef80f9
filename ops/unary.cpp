// Unary elementwise ops: each records the kernel of its row of
// engine/elementwise_ops.h (a Backend's unary, the math of
// engine/functors.h) and saves what its gradient reads, x or y or nothing.
#include "ops/unary.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

Tensor record_unary(UnaryOp kind, const Tensor& x, double param) {
  const autograd::OpInfo& op = registry::of(kind);
  const GradReads reads = unary_op_row(kind).reads;
  detail::check_float(op.name, x);
  autograd::SaveSpec save;
  if (reads == GradReads::input) save.inputs = {0};
  if (reads == GradReads::output) save.outputs = {0};
  return autograd::record_one({
      .op = op,
      .inputs = {x},
      .forward = [kind, param](
                     const Tensors& in,
                     auto*) { return Tensors{backend_of(in[0]).unary(kind, param, in[0])}; },
      .backward =
          [kind, param, reads](Node& node, const Tensors& g) {
            const Tensor v = reads == GradReads::input    ? node.saved_input(0)
                             : reads == GradReads::output ? node.saved_output(0)
                                                          : g[0];
            return Tensors{backend_of(g[0]).unary_backward(kind, param, v, g[0])};
          },
      .save = save,
  });
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  REPRISE_CHECK(!unary_op_row(op).takes_scalar, "unary: ", unary_op_name(op),
                " takes a scalar; call its own function (ops::pow, ops::add, ops::mul)");
  return record_unary(op, x, 0);
}

#define REPRISE_DEFINE_UNARY(name, ...) \
  Tensor name(const Tensor& x) { return record_unary(UnaryOp::name, x, 0); }
REPRISE_UNARY_OPS(REPRISE_DEFINE_UNARY)
#undef REPRISE_DEFINE_UNARY

Tensor pow(const Tensor& x, double e) { return record_unary(UnaryOp::pow, x, e); }

}  // namespace reprise::ops
