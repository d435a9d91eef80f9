#pragma once
// Top-k routing for a mixture of experts, fused into one op ("moe_route")
// so that the routing decision is one recorded node: a checkpoint policy
// can force-save it, and the recompute verifier names it when a replay
// routes differently.
//
// N = tokens, E = experts, k = experts per token, M = kept assignments.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

struct MoeRoute {
  // Differentiable, the gate of each kept assignment in dispatch order:
  // the top-k score, divided by the sum of the token's k top scores when
  // renormalizing. (M) in the scores' dtype.
  Tensor weights;
  Tensor indices;  // (N, k) i64, the chosen experts, best first (ties: lower expert)
  Tensor token;    // (M) i64, the token of each kept assignment
  Tensor counts;   // (E) i64, kept assignments per expert (the dispatch blocks)
  Tensor routed;   // (E) i64, assignments per expert before the capacity limit
};

// scores: (N, E) f32/f64 (softmax or sigmoid of the router logits),
// k in [1, E], capacity: kept assignments per expert at most (-1: no limit).
//
// The kept assignments are sorted by expert, then by token (then by rank
// among the token's k), so expert e's rows are the contiguous block
// [sum(counts[:e]), sum(counts[:e+1])) of token and weights. Over capacity,
// an expert keeps its earliest tokens. The sort and the gates are computed
// on one thread: the result does not depend on the thread count.
// Backward: the gradient of weights flows to the chosen scores through the
// renormalization; the unchosen scores get zero.
MoeRoute moe_route(const Tensor& scores, int64_t k, bool renormalize, int64_t capacity = -1);

}  // namespace reprise::ops
