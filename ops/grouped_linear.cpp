// grouped_linear: checks, forward (one Backend::matmul per block) and
// backward rule.
//
// Block e (rows [o_e, o_e + c_e) of x and y, c_e = counts[e]):
//   y_e = x_e W_e^T   (c_e, K) @ (N, K)^T:  dx_e = dy_e W_e,  dW_e = dy_e^T x_e
// The blocks are computed one after another; each product's bits do not
// depend on the thread count (Backend::matmul).
#include "ops/grouped_linear.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// The block sizes, checked against the rows of x and the number of weights.
std::vector<int64_t> block_sizes(const Tensor& x, const Tensor& counts, size_t groups) {
  REPRISE_CHECK(counts.defined() && counts.dtype() == DType::i64 && counts.dim() == 1 &&
                    counts.size(0) == int64_t(groups),
                "grouped_linear: expected counts (E) i64 with E = ", groups, " weights, got ",
                counts.defined() ? counts.describe() : std::string("undefined"));
  std::vector<int64_t> sizes = counts.to_vector<int64_t>();
  int64_t total = 0;
  for (size_t e = 0; e < sizes.size(); ++e) {
    REPRISE_CHECK(sizes[e] >= 0, "grouped_linear: counts[", e, "] = ", sizes[e], " is negative");
    total += sizes[e];
  }
  REPRISE_CHECK(total == x.size(0), "grouped_linear: counts sum to ", total, " but x ",
                x.describe(), " has ", x.size(0), " rows");
  return sizes;
}

// Copies the (rows, N) block into rows [row, row + rows) of out.
void put_rows(Tensor& out, int64_t row, const Tensor& block) {
  out.slice(0, row, row + block.size(0)).copy_(block);
}

Tensor backend_product(const Tensor& a, const Tensor& b) { return backend_of(a).matmul(a, b); }

}  // namespace

Tensor grouped_linear(const Tensor& x, const Tensor& counts, const std::vector<Tensor>& weights) {
  REPRISE_CHECK(!weights.empty(), "grouped_linear: expected at least one weight");
  detail::check_any_float("grouped_linear", x);
  REPRISE_CHECK(x.dim() == 2, "grouped_linear: expected x (M, K), got ", x.describe());
  const Shape sw = weights[0].shape();
  for (size_t e = 0; e < weights.size(); ++e) {
    detail::check_same_dtype_device("grouped_linear", x, weights[e]);
    REPRISE_CHECK(weights[e].dim() == 2 && weights[e].shape() == sw && sw[1] == x.size(1),
                  "grouped_linear: expected weights (N, K) with K = ", x.size(1),
                  " and one shape for all, got weights[", e, "] ", weights[e].describe(),
                  " (weights[0] ", weights[0].describe(), ")");
  }
  block_sizes(x, counts, weights.size());
  const size_t E = weights.size();
  Tensors inputs{x, counts};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  autograd::SaveSpec save{.inputs = {1}};
  bool weight_grad = false;
  for (const Tensor& w : weights) weight_grad = weight_grad || w.requires_grad();
  if (weight_grad) save.inputs.push_back(0);  // dW reads x
  if (x.requires_grad()) {
    for (size_t e = 0; e < E; ++e) save.inputs.push_back(uint32_t(2 + e));  // dx reads W
  }
  return autograd::record_one({
      .op = registry::kGroupedLinear,
      .inputs = inputs,
      .forward =
          [E](const Tensors& in, auto*) {
            const Tensor& xs = in[0];
            const std::vector<int64_t> sizes = block_sizes(xs, in[1], E);
            Tensor y =
                Tensor::empty({xs.size(0), in[2].size(0)}, xs.dtype(), xs.device());  // (M, N)
            int64_t row = 0;
            for (size_t e = 0; e < E; ++e) {
              if (sizes[e] == 0) continue;
              Tensor block = xs.slice(0, row, row + sizes[e]);  // (c, K)
              Tensor wt = in[2 + e].transpose(0, 1);            // (K, N)
              put_rows(y, row, backend_product(block, wt));     // (c, N)
              row += sizes[e];
            }
            return Tensors{y};
          },
      .backward =
          [E, sw](Node& node, const Tensors& g) {
            Tensors grads(2 + E);
            const Tensor& gy = g[0];  // (M, N)
            const Tensor counts = node.saved_input(1);
            const std::vector<int64_t> sizes = counts.to_vector<int64_t>();
            const bool dx = node.needs_input_grad(0);
            Tensor xs;
            if (dx)
              grads[0] = Tensor::empty({gy.size(0), sw[1]}, gy.dtype(), gy.device());  // (M, K)
            int64_t row = 0;
            for (size_t e = 0; e < E; ++e) {
              const bool dw = node.needs_input_grad(2 + e);
              if (dw && !xs.defined()) xs = node.saved_input(0);
              if (sizes[e] == 0) {
                if (dw) grads[2 + e] = Tensor::zeros(sw, gy.dtype(), gy.device());
                continue;
              }
              Tensor gb = gy.slice(0, row, row + sizes[e]);  // (c, N)
              if (dx) put_rows(grads[0], row, backend_product(gb, node.saved_input(2 + e)));
              if (dw) {
                Tensor xb = xs.slice(0, row, row + sizes[e]);            // (c, K)
                grads[2 + e] = backend_product(gb.transpose(0, 1), xb);  // (N, K)
              }
              row += sizes[e];
            }
            return grads;
          },
      .save = save,
  });
}

}  // namespace reprise::ops
