// gated_delta_rule: the backend's delta_rule kernel, recorded with its
// checkpoints as an auxiliary output for the backward.
#include "ops/delta_rule.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {

using autograd::Node;
using autograd::Tensors;

namespace {

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& decay,
                  const Tensor& beta, const Tensor& state) {
  constexpr const char* kName = "gated_delta_rule";
  REPRISE_CHECK(q.defined() && k.defined() && v.defined() && decay.defined() && beta.defined(),
                kName, ": undefined input");
  REPRISE_CHECK(q.dtype() == DType::f32 || q.dtype() == DType::f64, kName,
                ": expected f32 or f64 tensors, got q ", q.describe());
  for (const Tensor* t : {&k, &v, &decay, &beta}) detail::check_same_dtype_device(kName, q, *t);
  REPRISE_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.dim() == 4 && v.size(0) == q.size(0) &&
                    v.size(1) == q.size(1) && v.size(2) == q.size(2),
                kName, ": expected q and k of shape (B, T, H, K) and v (B, T, H, V), got q ",
                q.describe(), ", k ", k.describe(), ", v ", v.describe());
  const Shape gates{q.size(0), q.size(1), q.size(2)};
  REPRISE_CHECK(decay.shape() == gates && beta.shape() == gates, kName,
                ": expected decay and beta of shape (B, T, H) = ", to_string(gates), ", got ",
                decay.describe(), " and ", beta.describe());
  if (!state.defined()) return;
  detail::check_same_dtype_device(kName, q, state);
  const Shape want{q.size(0), q.size(2), q.size(3), v.size(3)};
  REPRISE_CHECK(state.shape() == want, kName,
                ": expected a state of shape (B, H, K, V) = ", to_string(want), ", got ",
                state.describe());
  REPRISE_CHECK(!state.requires_grad() || !GradMode::enabled(), kName,
                ": the initial state takes no gradient; detach it (got ", state.describe(),
                " that requires grad)");
}

}  // namespace

DeltaRuleResult gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& decay, const Tensor& beta, const Tensor& state) {
  check_inputs(q, k, v, decay, beta, state);
  const Tensor initial = state.defined() ? state.detach().contiguous() : Tensor();
  const Tensors out = autograd::record({
      .op = registry::kDeltaRule,
      .inputs = {q, k, v, decay, beta},
      .forward =
          [initial](const Tensors& in, auto*) {
            return backend_of(in[0]).delta_rule(in[0].contiguous(), in[1].contiguous(),
                                                in[2].contiguous(), in[3].contiguous(),
                                                in[4].contiguous(), initial);
          },
      .backward =
          [](Node& node, const Tensors& g) {
            // Only out is differentiable (the state is returned detached),
            // so g[0] is its gradient.
            const Tensor q = node.saved_input(0).contiguous(), dout = g[0].contiguous();
            return backend_of(q).delta_rule_backward(
                q, node.saved_input(1).contiguous(), node.saved_input(2).contiguous(),
                node.saved_input(3).contiguous(), node.saved_input(4).contiguous(),
                node.saved_output(2), dout);
          },
      .save = {.inputs = {0, 1, 2, 3, 4}, .outputs = {2}},
      .num_public_outputs = 2,
  });
  return {out[0], out[1].detach()};
}

}  // namespace reprise::ops
