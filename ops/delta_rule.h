#pragma once
// The gated delta rule, the recurrence of a gated DeltaNet layer
// (nn/gated_deltanet.h): a (K, V) state per batch and head, decayed, then
// corrected toward each position's value, then read by its query:
//
//   S_t = a_t S_{t-1} + k_t d_t^T,   d_t = beta_t (v_t - a_t S_{t-1}^T k_t)
//   out_t = S_t^T q_t
//
// computed position after position in a fixed order of operations
// (engine/kernels/delta_rule.def), so a position's bits do not depend on
// how many positions one call takes: decoding token by token from a cached
// state gives the bits of one call over the whole sequence. The backward
// keeps the state before every kDeltaRuleBlock-th position (an auxiliary
// output, B H ceil(T / 64) K V numbers) and recomputes the rest.
//
// B = batch, T = positions, H = heads, K = key dims, V = value dims.

#include "engine/tensor.h"

namespace reprise::ops {

struct DeltaRuleResult {
  Tensor out;    // (B, T, H, V)
  Tensor state;  // (B, H, K, V) after the last position; no gradient flows through it
};

// q, k: (B, T, H, K), v: (B, T, H, V), decay a and beta: (B, T, H), one
// dtype (f32 or f64) and device; state: (B, H, K, V), the state before
// position 0 (undefined: zeros), which takes no gradient. Differentiable in
// q, k, v, decay and beta. T may be 0.
DeltaRuleResult gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& decay, const Tensor& beta, const Tensor& state = {});

}  // namespace reprise::ops
