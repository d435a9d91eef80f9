// swiglu: silu(gate) * up in one pass, and both gradients in one pass, with
// the math of silu followed by mul (engine/functors.h fn::Swiglu), so the
// bits match the two-op form. bf16 operands (the MLP's activations under
// bf16 autocast) compute in f32 and round each result once.
#include "ops/swiglu.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {

using autograd::Node;
using autograd::Tensors;

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  constexpr const char* kName = "swiglu";
  detail::check_float_or_bf16(kName, gate);
  detail::check_same_dtype_device(kName, gate, up);
  REPRISE_CHECK(gate.shape() == up.shape(), kName, ": gate ", gate.describe(), " and up ",
                up.describe(), " must have the same shape");
  return autograd::record_one({
      .op = registry::kSwiglu,
      .inputs = {gate, up},
      .forward = [](const Tensors& in,
                    auto*) { return Tensors{backend_of(in[0]).swiglu(in[0], in[1])}; },
      .backward =
          [](Node& node, const Tensors& g) {
            return backend_of(g[0]).swiglu_backward(node.saved_input(0), node.saved_input(1), g[0]);
          },
      .save = {.inputs = {0, 1}},
  });
}

}  // namespace reprise::ops
