// Unary elementwise ops: forward functor, gradient functor and OpInfo, one
// row each. The gradient reads x or y, whichever its formula needs, and the
// op saves only that.
#include "ops/unary.h"

#include "autograd/tape.h"
#include "ops/elementwise.h"
#include "ops/functors.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

enum class Reads { input, output, nothing };

template <class Fwd, class Grad>
Tensor unary(const autograd::OpInfo& op, const Tensor& x, Reads reads, Fwd fwd, Grad grad) {
  detail::check_float_cpu(op.name, x);
  const char* name = op.name;
  autograd::SaveSpec save;
  if (reads == Reads::input) save.inputs = {0};
  if (reads == Reads::output) save.outputs = {0};
  return autograd::record_one({
      .op = op,
      .inputs = {x},
      .forward = [name, fwd](const Tensors& in,
                             auto*) { return Tensors{detail::map(name, in[0], fwd)}; },
      .backward =
          [name, reads, grad](Node& node, const Tensors& g) {
            Tensor v = reads == Reads::input    ? node.saved_input(0)
                       : reads == Reads::output ? node.saved_output(0)
                                                : g[0];
            return Tensors{detail::map3(name, v, v, g[0], grad)};
          },
      .save = save,
  });
}

const autograd::OpInfo kNeg{"neg"}, kExp{"exp"}, kLog{"log"}, kSqrt{"sqrt"}, kRsqrt{"rsqrt"},
    kPow{"pow"}, kRelu{"relu"}, kGelu{"gelu"}, kSilu{"silu"}, kSigmoid{"sigmoid"}, kTanh{"tanh"};

}  // namespace

// The gradient functors take (x, y, dy); with one saved tensor v, both x
// and y slots receive v and each functor reads the one it was written for.
Tensor neg(const Tensor& x) { return unary(kNeg, x, Reads::nothing, fn::Neg{}, fn::NegGrad{}); }
Tensor exp(const Tensor& x) { return unary(kExp, x, Reads::output, fn::Exp{}, fn::ExpGrad{}); }
Tensor log(const Tensor& x) { return unary(kLog, x, Reads::input, fn::Log{}, fn::LogGrad{}); }
Tensor sqrt(const Tensor& x) { return unary(kSqrt, x, Reads::output, fn::Sqrt{}, fn::SqrtGrad{}); }
Tensor rsqrt(const Tensor& x) {
  return unary(kRsqrt, x, Reads::output, fn::Rsqrt{}, fn::RsqrtGrad{});
}
Tensor pow(const Tensor& x, double e) {
  return unary(kPow, x, Reads::input, fn::PowScalar{e}, fn::PowScalarGrad{e});
}
Tensor relu(const Tensor& x) { return unary(kRelu, x, Reads::input, fn::Relu{}, fn::ReluGrad{}); }
Tensor gelu(const Tensor& x) {
  return unary(kGelu, x, Reads::input, fn::GeluTanh{}, fn::GeluTanhGrad{});
}
Tensor silu(const Tensor& x) { return unary(kSilu, x, Reads::input, fn::Silu{}, fn::SiluGrad{}); }
Tensor sigmoid(const Tensor& x) {
  return unary(kSigmoid, x, Reads::output, fn::Sigmoid{}, fn::SigmoidGrad{});
}
Tensor tanh(const Tensor& x) { return unary(kTanh, x, Reads::output, fn::Tanh{}, fn::TanhGrad{}); }

}  // namespace reprise::ops
