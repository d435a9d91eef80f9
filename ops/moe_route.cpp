// moe_route: checks, recording, and what the backward reads; the kernels
// (top-k, gates, counting sort by expert) are Backend::moe_route.
//
// Per token n with chosen scores v_j (j < k) at experts i_j and scale c:
//   S = sum_j v_j,  g_j = (v_j / S) c (renormalize) or v_j c
// and the output weights are the g of the kept assignments in dispatch
// order. Backward, with dg scattered back to (N, k) (zero where dropped):
//   renormalize: dv_j = c ((dg_j - sum_l dg_l v_l / S) / S),  else dv_j = c dg_j
//   dscores[n, i_j] = dv_j, zero elsewhere.
#include "ops/moe_route.h"

#include <cmath>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "engine/route_choice.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Outputs: the six public ones of MoeRoute, then two kept for backward.
enum Output : uint32_t { kWeights, kIndices, kToken, kCounts, kRouted, kMargin, kSlot, kTop };

}  // namespace

MoeRoute moe_route(const Tensor& scores, int64_t k, const MoeRouteOptions& o) {
  REPRISE_CHECK(scores.defined() && scores.dim() == 2 &&
                    (scores.dtype() == DType::f32 || scores.dtype() == DType::f64),
                "moe_route: expected scores (N, E) f32 or f64, got ",
                scores.defined() ? scores.describe() : std::string("undefined"));
  const int64_t E = scores.size(1);
  REPRISE_CHECK(k >= 1 && k <= E, "moe_route: k = ", k, " must be in [1, E = ", E, "] for scores ",
                scores.describe());
  REPRISE_CHECK(o.capacity >= -1, "moe_route: capacity must be -1 (no limit) or >= 0, got ",
                o.capacity);
  REPRISE_CHECK(
      !o.bias.defined() || (o.bias.dim() == 1 && o.bias.size(0) == E &&
                            o.bias.dtype() == scores.dtype() && o.bias.device() == scores.device()),
      "moe_route: expected a bias of shape [", E, "] like scores ", scores.describe(), ", got ",
      o.bias.defined() ? o.bias.describe() : std::string());
  REPRISE_CHECK(o.n_group >= 1 && o.n_group <= route::kMaxGroups && E % o.n_group == 0 &&
                    (o.n_group == 1 || E / o.n_group >= 2),
                "moe_route: n_group = ", o.n_group, " must split E = ", E, " into at most ",
                route::kMaxGroups, " groups of at least 2 experts");
  REPRISE_CHECK(
      o.topk_group >= 1 && o.topk_group <= o.n_group && k <= o.topk_group * (E / o.n_group),
      "moe_route: topk_group = ", o.topk_group, " of n_group = ", o.n_group,
      " groups cannot hold k = ", k, " experts of E = ", E);
  REPRISE_CHECK(std::isfinite(o.scale) && o.scale > 0, "moe_route: scale must be positive, got ",
                o.scale);
  const RouteParams params{.k = k,
                           .renormalize = o.renormalize,
                           .capacity = o.capacity,
                           .n_group = o.n_group,
                           .topk_group = o.topk_group,
                           .scale = o.scale};
  const Tensor bias = o.bias.defined() ? o.bias.detach() : Tensor();  // no gradient
  Tensors out = autograd::record({
      .op = registry::kMoeRoute,
      .inputs = {scores},
      .forward = [params, bias](const Tensors& in,
                                auto*) { return backend_of(in[0]).moe_route(in[0], bias, params); },
      .backward =
          [E, params](Node& node, const Tensors& g) {
            const Tensor& gw = g[kWeights];
            return Tensors{backend_of(gw).moe_route_backward(gw, node.saved_output(kIndices),
                                                             node.saved_output(kSlot),
                                                             node.saved_output(kTop), E, params)};
          },
      .save = {.outputs = {kIndices, kSlot, kTop}},
      .num_public_outputs = 6,
  });
  return {out[kWeights], out[kIndices], out[kToken], out[kCounts], out[kRouted], out[kMargin]};
}

MoeRoute moe_route(const Tensor& scores, int64_t k, bool renormalize, int64_t capacity) {
  return moe_route(scores, k, {.renormalize = renormalize, .capacity = capacity});
}

}  // namespace reprise::ops
