// cross_entropy: checks, recording, and the backward rule, which rebuilds
// softmax from the saved logits and logsumexp:
//   dlogits[n, c] = scale * (exp(logits[n, c] - lse[n]) - [c == targets[n]])
// with scale = g / count (mean) or g (sum), and 0 for ignored rows.
// bf16 logits compute in f32 (loss and lse f32) and their gradient rounds
// once to bf16: the bits of the f32 op on the widened logits, then a cast.
// N = rows, C = classes.
#include "ops/loss.h"

#include <limits>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

void check_inputs(const Tensor& logits, const Tensor& targets) {
  detail::check_float_or_bf16("cross_entropy", logits);
  REPRISE_CHECK(logits.dim() == 2, "cross_entropy: expected logits of shape (N, C), got ",
                logits.describe());
  REPRISE_CHECK(targets.defined(), "cross_entropy: undefined targets");
  REPRISE_CHECK(targets.dtype() == DType::i64 && targets.device() == logits.device(),
                "cross_entropy: expected targets of dtype i64 on ", to_string(logits.device()),
                ", got ", targets.describe(), " (logits ", logits.describe(), ")");
  REPRISE_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "cross_entropy: targets ",
                targets.describe(), " do not match logits ", logits.describe(),
                " (expected targets of shape [", logits.size(0), "])");
}

// The number of rows whose target counts. Raises on a target outside
// [0, C) that is not ignore_index.
int64_t count_targets(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const int64_t C = logits.size(1);
  const TargetCount c = backend_of(targets).count_targets(targets, C, ignore_index);
  if (c.first_bad_row >= 0) {
    const int64_t bad = targets.select(0, c.first_bad_row).item<int64_t>();
    REPRISE_FAIL("cross_entropy: target ", bad, " at row ", c.first_bad_row,
                 " is out of range for logits ", logits.describe(), " (expected a class in [0, ", C,
                 ") or ignore_index ", ignore_index, ")");
  }
  return c.count;
}

// logits: (N, C), targets: (N) -> {loss (), lse (N)}.
Tensors forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                Reduction reduction) {
  const int64_t count = count_targets(logits, targets, ignore_index);
  Tensors out = backend_of(logits).cross_entropy(logits, targets, ignore_index);
  double total = out[0].item<double>();
  if (reduction == Reduction::mean) {
    total = count > 0 ? total / double(count) : std::numeric_limits<double>::quiet_NaN();
  }
  return {Tensor::full({}, total, out[1].dtype(), logits.device()), out[1]};
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     Reduction reduction) {
  check_inputs(logits, targets);
  return autograd::record_one({
      .op = registry::kCrossEntropy,
      .inputs = {logits, targets},
      .forward = [ignore_index, reduction](
                     const Tensors& in,
                     auto*) { return forward(in[0], in[1], ignore_index, reduction); },
      .backward =
          [ignore_index, reduction](Node& node, const Tensors& g) {
            const Tensor logits = node.saved_input(0), targets = node.saved_input(1);
            // The mean's gradient is g / count (0 when nothing counts).
            const double divisor = reduction == Reduction::mean
                                       ? double(count_targets(logits, targets, ignore_index))
                                       : 1.0;
            return Tensors{backend_of(logits).cross_entropy_backward(
                               logits, targets, node.saved_output(1), g[0], divisor, ignore_index),
                           Tensor()};
          },
      .save = {.inputs = {0, 1}, .outputs = {1}},
      .num_public_outputs = 1,
  });
}

}  // namespace reprise::ops
