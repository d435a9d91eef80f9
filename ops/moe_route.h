#pragma once
// Top-k routing for a mixture of experts, fused into one op ("moe_route")
// so that the routing decision is one recorded node: a checkpoint policy
// can force-save it, and the recompute verifier names it when a replay
// routes differently.
//
// N = tokens, E = experts, k = experts per token, M = kept assignments,
// G = n_group.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

struct MoeRoute {
  // Differentiable, the gate of each kept assignment in dispatch order:
  // the chosen score, divided by the sum of the token's k chosen scores
  // when renormalizing, times the scale. (M) in the scores' dtype.
  Tensor weights;
  Tensor indices;  // (N, k) i64, the chosen experts, best first (ties: lower expert)
  Tensor token;    // (M) i64, the token of each kept assignment
  Tensor counts;   // (E) i64, kept assignments per expert (the dispatch blocks)
  Tensor routed;   // (E) i64, assignments per expert before the capacity limit
  // (N) i64, how close each token came to another choice: the ulps from
  // its k-th choice value down to the best one it did not choose (in the
  // chosen groups; route::kNoRunnerUp when it chose them all). 0 or 1: a
  // near-tie that a change of one ulp in the scores may flip.
  Tensor margin;
};

struct MoeRouteOptions {
  bool renormalize = true;
  int64_t capacity = -1;  // kept assignments per expert at most (-1: no limit)
  // DeepSeek-V3's routing: the experts are chosen by score + bias (a (E)
  // tensor of the scores' dtype and device; undefined: the scores alone),
  // among the topk_group of n_group groups of E / G consecutive experts
  // whose two best biased scores sum highest (ties: lower group; G at most
  // route::kMaxGroups). The
  // gates are the unbiased scores of the chosen experts. The bias gets no
  // gradient.
  Tensor bias;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double scale = 1.0;  // every gate times this (routed_scaling_factor)
};

// scores: (N, E) f32/f64 (softmax or sigmoid of the router logits),
// k in [1, E].
//
// The kept assignments are sorted by expert, then by token (then by rank
// among the token's k), so expert e's rows are the contiguous block
// [sum(counts[:e]), sum(counts[:e+1])) of token and weights. Over capacity,
// an expert keeps its earliest tokens. The sort and the gates are computed
// on one thread: the result does not depend on the thread count.
// Backward: the gradient of weights flows to the chosen scores through the
// renormalization and the scale; the unchosen scores get zero.
MoeRoute moe_route(const Tensor& scores, int64_t k, const MoeRouteOptions& options = {});

// The common case: moe_route(scores, k, {renormalize, capacity}).
MoeRoute moe_route(const Tensor& scores, int64_t k, bool renormalize, int64_t capacity = -1);

}  // namespace reprise::ops
