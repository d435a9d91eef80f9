#pragma once
// Normalisations over the last dim, fused: one pass per row forward (the
// per-row rstd, and mean for layernorm, are kept as auxiliary outputs for
// backward) and one pass per row backward. C = channels (the last dim).

#include "engine/tensor.h"

namespace reprise::ops {

// RMSNorm as Llama / HF LlamaRMSNorm:
//   y = w * (x * rsqrt(mean(x^2, -1) + eps))
// x: (..., C), w: (C) -> (..., C), same dtype. Computed in x's dtype; HF
// upcasts to f32 and casts back, which for f32 inputs is the same arithmetic
// in the same order (only the summation order of mean(x^2) differs).
Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps = 1e-6);

// LayerNorm over the last dim, as torch's F.layer_norm (biased variance):
//   y = (x - mean) * rsqrt(var + eps) * w + b
// x: (..., C), w: (C), b: (C) or undefined (no bias) -> (..., C).
Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b = {}, double eps = 1e-5);

}  // namespace reprise::ops
