// cross_entropy: one pass per row computes the row's logsumexp (kept as an
// auxiliary output) and its loss; backward rebuilds softmax from the saved
// logits and logsumexp:
//   dlogits[n, c] = scale * (exp(logits[n, c] - lse[n]) - [c == targets[n]])
// with scale = g / count (mean) or g (sum), and 0 for ignored rows.
// N = rows, C = classes.
#include "ops/loss.h"

#include <limits>

#include "autograd/tape.h"
#include "engine/threads.h"
#include "ops/elementwise.h"
#include "ops/row_math.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// max, subtract, exp and sum per logit.
double cross_entropy_flops(const Tensors& in, const Tensors&) {
  return 4.0 * double(in[0].numel());
}

const autograd::OpInfo kCrossEntropy{"cross_entropy", false, cross_entropy_flops};

void check_inputs(const Tensor& logits, const Tensor& targets) {
  detail::check_float_cpu("cross_entropy", logits);
  REPRISE_CHECK(logits.dim() == 2, "cross_entropy: expected logits of shape (N, C), got ",
                logits.describe());
  REPRISE_CHECK(targets.defined(), "cross_entropy: undefined targets");
  REPRISE_CHECK(targets.dtype() == DType::i64 && targets.device().is_cpu(),
                "cross_entropy: expected targets of dtype i64 on cpu, got ", targets.describe(),
                " (logits ", logits.describe(), ")");
  REPRISE_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "cross_entropy: targets ",
                targets.describe(), " do not match logits ", logits.describe(),
                " (expected targets of shape [", logits.size(0), "])");
}

// The number of rows whose target counts. Raises on a target outside
// [0, C) that is not ignore_index (a sequential scan, before any kernel).
int64_t count_targets(const Tensor& logits, const int64_t* t, int64_t ignore_index) {
  const int64_t N = logits.size(0), C = logits.size(1);
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == ignore_index) continue;
    REPRISE_CHECK(t[n] >= 0 && t[n] < C, "cross_entropy: target ", t[n], " at row ", n,
                  " is out of range for logits ", logits.describe(), " (expected a class in [0, ",
                  C, ") or ignore_index ", ignore_index, ")");
    ++count;
  }
  return count;
}

// logits: (N, C), targets: (N) -> {loss (), lse (N)}.
Tensors forward(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index,
                Reduction reduction) {
  Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  const int64_t* t = targets.data<int64_t>();
  const int64_t count = count_targets(logits, t, ignore_index);
  Tensor lse = Tensor::empty({N}, logits.dtype());
  double total = 0;
  dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
    T* l = lse.data<T>();
    // Row losses are summed afterwards in row order, in double, so the
    // total does not depend on how rows were split across threads.
    std::vector<double> row_loss(size_t(N), 0.0);
    threads::parallel_for(N, detail::row_grain(C), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        if (t[n] == ignore_index) {
          l[n] = T(0);  // never read: the row has no gradient
          continue;
        }
        const T* xr = x + n * C;
        T m = detail::row_max(xr, C);
        T sum = detail::row_sum_of<T>(C, [&](int64_t c) { return detail::row_exp(xr[c] - m); });
        T v = m + std::log(sum);
        l[n] = v;
        row_loss[size_t(n)] = double(v - xr[t[n]]);
      }
    });
    for (double v : row_loss) total += v;
  });
  if (reduction == Reduction::mean) {
    total = count > 0 ? total / double(count) : std::numeric_limits<double>::quiet_NaN();
  }
  return {Tensor::scalar(total, logits.dtype()), lse};
}

// dlogits: (N, C) from logits (N, C), targets (N), lse (N) and the loss gradient g ().
Tensor backward(const Tensor& logits_in, const Tensor& targets_in, const Tensor& lse_in,
                const Tensor& g, int64_t ignore_index, Reduction reduction) {
  Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  Tensor lse = lse_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  const int64_t* t = targets.data<int64_t>();
  const int64_t count = count_targets(logits, t, ignore_index);
  double scale = g.item<double>();
  if (reduction == Reduction::mean) scale = count > 0 ? scale / double(count) : 0.0;
  Tensor dx = Tensor::empty(logits.shape(), logits.dtype());
  dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
    const T* l = lse.data<T>();
    T* d = dx.data<T>();
    const T s = T(scale);
    threads::parallel_for(N, detail::row_grain(C), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        T* dr = d + n * C;
        if (t[n] == ignore_index) {
          for (int64_t c = 0; c < C; ++c) dr[c] = T(0);
          continue;
        }
        const T* xr = x + n * C;
        const T lr = l[n];
        for (int64_t c = 0; c < C; ++c) dr[c] = detail::row_exp(xr[c] - lr) * s;
        dr[t[n]] -= s;
      }
    });
  });
  return dx;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     Reduction reduction) {
  check_inputs(logits, targets);
  return autograd::record_one({
      .op = kCrossEntropy,
      .inputs = {logits, targets},
      .forward = [ignore_index, reduction](
                     const Tensors& in,
                     auto*) { return forward(in[0], in[1], ignore_index, reduction); },
      .backward =
          [ignore_index, reduction](Node& node, const Tensors& g) {
            return Tensors{backward(node.saved_input(0), node.saved_input(1), node.saved_output(1),
                                    g[0], ignore_index, reduction),
                           Tensor()};
          },
      .save = {.inputs = {0, 1}, .outputs = {1}},
      .num_public_outputs = 1,
  });
}

}  // namespace reprise::ops
