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
// logits: (N, C) f32/f64/bf16, targets: (N) i64 in [0, C) or ignore_index -> ()
// scalar, f32 for bf16 logits. bf16 logits (a head's product under bf16
// autocast) compute in f32 and round their gradient once to bf16, so they
// give the bits of the f32 op on the widened logits, cast back: what
// torch's autocast does with logits.float(), without the f32 copy.
// The backward, (softmax(logits) - onehot(targets)) * scale, is computed from
// the saved logits and per-row logsumexp; no log-softmax tensor is stored.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

}  // namespace reprise::ops
