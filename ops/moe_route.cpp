// moe_route: checks, recording, and what the backward reads; the kernels
// (top-k, gates, counting sort by expert) are Backend::moe_route.
//
// Per token n with top-k scores v_j (j < k) at experts i_j:
//   S = sum_j v_j,  g_j = v_j / S (renormalize) or v_j
// and the output weights are the g of the kept assignments in dispatch
// order. Backward, with dg scattered back to (N, k) (zero where dropped):
//   renormalize: dv_j = (dg_j - sum_l dg_l g_l) / S,  else dv_j = dg_j
//   dscores[n, i_j] = dv_j, zero elsewhere.
#include "ops/moe_route.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Outputs: the five public ones of MoeRoute, then two kept for backward.
enum Output : uint32_t { kWeights, kIndices, kToken, kCounts, kRouted, kSlot, kTop };

}  // namespace

MoeRoute moe_route(const Tensor& scores, int64_t k, bool renormalize, int64_t capacity) {
  REPRISE_CHECK(scores.defined() && scores.dim() == 2 &&
                    (scores.dtype() == DType::f32 || scores.dtype() == DType::f64),
                "moe_route: expected scores (N, E) f32 or f64, got ",
                scores.defined() ? scores.describe() : std::string("undefined"));
  const int64_t E = scores.size(1);
  REPRISE_CHECK(k >= 1 && k <= E, "moe_route: k = ", k, " must be in [1, E = ", E, "] for scores ",
                scores.describe());
  REPRISE_CHECK(capacity >= -1, "moe_route: capacity must be -1 (no limit) or >= 0, got ",
                capacity);
  Tensors out = autograd::record({
      .op = registry::kMoeRoute,
      .inputs = {scores},
      .forward =
          [k, renormalize, capacity](const Tensors& in, auto*) {
            return backend_of(in[0]).moe_route(in[0], k, renormalize, capacity);
          },
      .backward =
          [E, renormalize](Node& node, const Tensors& g) {
            const Tensor& gw = g[kWeights];
            return Tensors{backend_of(gw).moe_route_backward(
                gw, node.saved_output(kIndices), node.saved_output(kSlot), node.saved_output(kTop),
                E, renormalize)};
          },
      .save = {.outputs = {kIndices, kSlot, kTop}},
      .num_public_outputs = 5,
  });
  return {out[kWeights], out[kIndices], out[kToken], out[kCounts], out[kRouted]};
}

}  // namespace reprise::ops
