// matmul and linear: checks, recording and backward rule for each; the
// products are Backend::matmul.
//
// matmul  C = A B   (..., M, K) @ (..., K, N):  dA = dC B^T,  dB = A^T dC,
//                   each summed over the batch dims broadcasting expanded.
// linear  y = x W^T (..., K) @ (N, K)^T:        dx = dy W,    dW = dy^T x,
//                   dW summed over every row of x.
// Transposes here are layout views: the kernel reads them as column-major
// matrices, so no gradient copies a transposed operand.
#include "ops/matmul.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/reduce.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// a @ b through the backend (not recorded).
Tensor product(const Tensor& a, const Tensor& b) { return backend_of(a).matmul(a, b); }

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// (K) -> (1, K); other shapes unchanged.
Tensor at_least_2d(const Tensor& t) { return t.dim() == 1 ? t.unsqueeze(0) : t; }

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_same_dtype_device("matmul", a, b);
  detail::check_any_float("matmul", a);
  REPRISE_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: expected a (..., M, K) and b (..., K, N), ",
                "got a ", a.describe(), " and b ", b.describe(),
                " (1-D operands are not supported: unsqueeze a vector to (1, K) or (K, 1))");
  REPRISE_CHECK(a.size(-1) == b.size(-2), "matmul: inner dims differ: a ", a.describe(),
                " has K = ", a.size(-1), ", b ", b.describe(), " has K = ", b.size(-2),
                " (expected a (..., M, K) and b (..., K, N))");
  const Shape sa = a.shape(), sb = b.shape();
  {
    Shape ba = batch_of(a), bb = batch_of(b);
    for (size_t i = 1; i <= std::min(ba.size(), bb.size()); ++i) {
      int64_t x = ba[ba.size() - i], y = bb[bb.size() - i];
      REPRISE_CHECK(x == y || x == 1 || y == 1, "matmul: batch dims of a ", a.describe(), " and b ",
                    b.describe(), " cannot be broadcast together");
    }
  }
  autograd::SaveSpec save;
  if (b.requires_grad()) save.inputs.push_back(0);  // dB reads A
  if (a.requires_grad()) save.inputs.push_back(1);  // dA reads B
  return autograd::record_one({
      .op = registry::kMatmul,
      .inputs = {a, b},
      .forward = [](const Tensors& in, auto*) { return Tensors{product(in[0], in[1])}; },
      .backward =
          [sa, sb](Node& node, const Tensors& g) {
            Tensors grads(2);
            const Tensor& gc = g[0];  // (..., M, N)
            if (node.needs_input_grad(0)) {
              Tensor bt = node.saved_input(1).transpose(-1, -2);  // (..., N, K)
              grads[0] = detail::sum_to_shape(product(gc, bt), sa);
            }
            if (node.needs_input_grad(1)) {
              Tensor av = node.saved_input(0);
              const int64_t K = sa.back(), N = sb.back();
              if (numel(Shape(sb.begin(), sb.end() - 2)) == 1) {
                // One B for the batch: sum_i A_i^T dC_i is one product over
                // the stacked rows, (K, batch*M) @ (batch*M, N).
                Tensor rows_a = av.reshape({-1, K}), rows_g = gc.reshape({-1, N});
                grads[1] = product(rows_a.transpose(0, 1), rows_g).view(sb);
              } else {
                grads[1] = detail::sum_to_shape(product(av.transpose(-1, -2), gc), sb);
              }
            }
            return grads;
          },
      .save = save,
  });
}

Tensor linear(const Tensor& x, const Tensor& w) {
  detail::check_same_dtype_device("linear", x, w);
  detail::check_any_float("linear", x);
  REPRISE_CHECK(x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1),
                "linear: expected x (..., K) and w (N, K), got x ", x.describe(), " and w ",
                w.describe());
  const Shape sx = x.shape(), sw = w.shape();
  autograd::SaveSpec save;
  if (w.requires_grad()) save.inputs.push_back(0);  // dW reads x
  if (x.requires_grad()) save.inputs.push_back(1);  // dx reads W
  return autograd::record_one({
      .op = registry::kLinear,
      .inputs = {x, w},
      .forward =
          [](const Tensors& in, auto*) {
            Shape out = in[0].shape();
            out.back() = in[1].size(0);
            Tensor wt = in[1].transpose(0, 1);  // (K, N), column-major
            return Tensors{product(at_least_2d(in[0]), wt).view(out)};
          },
      .backward =
          [sx, sw](Node& node, const Tensors& g) {
            Tensors grads(2);
            const Tensor& gy = g[0];  // (..., N)
            if (node.needs_input_grad(0)) {
              grads[0] = product(at_least_2d(gy), node.saved_input(1)).view(sx);
            }
            if (node.needs_input_grad(1)) {
              Tensor rows_g = gy.reshape({-1, sw[0]}),
                     rows_x = node.saved_input(0).reshape({-1, sw[1]});
              grads[1] = product(rows_g.transpose(0, 1), rows_x);  // (N, K)
            }
            return grads;
          },
      .save = save,
  });
}

}  // namespace reprise::ops
