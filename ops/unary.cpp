// Unary elementwise ops: what each gradient reads, and the kernel (a
// Backend's unary, the math of engine/functors.h). The gradient reads x or
// y, whichever its formula needs, and the op saves only that.
#include "ops/unary.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

enum class Reads { input, output, nothing };

Tensor unary(const autograd::OpInfo& op, UnaryOp kind, const Tensor& x, Reads reads,
             double param = 0) {
  detail::check_float(op.name, x);
  autograd::SaveSpec save;
  if (reads == Reads::input) save.inputs = {0};
  if (reads == Reads::output) save.outputs = {0};
  return autograd::record_one({
      .op = op,
      .inputs = {x},
      .forward = [kind, param](
                     const Tensors& in,
                     auto*) { return Tensors{backend_of(in[0]).unary(kind, param, in[0])}; },
      .backward =
          [kind, param, reads](Node& node, const Tensors& g) {
            const Tensor v = reads == Reads::input    ? node.saved_input(0)
                             : reads == Reads::output ? node.saved_output(0)
                                                      : g[0];
            return Tensors{backend_of(g[0]).unary_backward(kind, param, v, g[0])};
          },
      .save = save,
  });
}

}  // namespace

Tensor neg(const Tensor& x) { return unary(registry::kNeg, UnaryOp::neg, x, Reads::nothing); }
Tensor exp(const Tensor& x) { return unary(registry::kExp, UnaryOp::exp, x, Reads::output); }
Tensor log(const Tensor& x) { return unary(registry::kLog, UnaryOp::log, x, Reads::input); }
Tensor sqrt(const Tensor& x) { return unary(registry::kSqrt, UnaryOp::sqrt, x, Reads::output); }
Tensor rsqrt(const Tensor& x) { return unary(registry::kRsqrt, UnaryOp::rsqrt, x, Reads::output); }
Tensor pow(const Tensor& x, double e) {
  return unary(registry::kPow, UnaryOp::pow, x, Reads::input, e);
}
Tensor relu(const Tensor& x) { return unary(registry::kRelu, UnaryOp::relu, x, Reads::input); }
Tensor gelu(const Tensor& x) { return unary(registry::kGelu, UnaryOp::gelu, x, Reads::input); }
Tensor silu(const Tensor& x) { return unary(registry::kSilu, UnaryOp::silu, x, Reads::input); }
Tensor sigmoid(const Tensor& x) {
  return unary(registry::kSigmoid, UnaryOp::sigmoid, x, Reads::output);
}
Tensor tanh(const Tensor& x) { return unary(registry::kTanh, UnaryOp::tanh, x, Reads::output); }

}  // namespace reprise::ops
