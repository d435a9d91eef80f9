#pragma once
// Losses. N = rows (tokens), C = classes (vocabulary).

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::ops {

enum class Reduction { mean, sum };

// Cross-entropy fused with log-softmax, as torch's F.cross_entropy:
//   loss_n = logsumexp(logits[n, :]) - logits[n, targets[n]]
// over the rows whose target is not ignore_index, summed, or averaged over
// those rows for mean (NaN when every target is ignored, as in torch).
// logits: (N, C) f32/f64, targets: (N) i64 in [0, C) or ignore_index -> () scalar.
// The backward, (softmax(logits) - onehot(targets)) * scale, is computed from
// the saved logits and per-row logsumexp; no log-softmax tensor is stored.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

}  // namespace reprise::ops
