// softmax and log_softmax: the layout around the kernels, which see
// contiguous rows, and backward rules that read only the saved output y.
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
// A dim other than the last is moved last (one copy in, one out), so the
// kernels only ever see rows of length R = x.size(dim).
#include "ops/softmax.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// The permutation that moves `dim` last, keeping the other dims in order.
std::vector<int64_t> dim_last(int64_t dim, int64_t ndim) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d != dim) perm.push_back(d);
  }
  perm.push_back(dim);
  return perm;
}

std::vector<int64_t> inverse_of(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  return inv;
}

// f(inputs moved so that `dim` is last and contiguous), moved back to the
// original layout.
template <class F>
Tensor along_last(int64_t dim, const Tensors& ins, F f) {
  const Tensor& x0 = ins[0];
  const bool last = x0.dim() == 0 || dim == x0.dim() - 1;
  const std::vector<int64_t> perm = last ? std::vector<int64_t>{} : dim_last(dim, x0.dim());
  Tensors moved;
  for (const Tensor& t : ins) moved.push_back(last ? t.contiguous() : t.permute(perm).contiguous());
  if (x0.dim() == 0) {
    for (Tensor& t : moved) t = t.reshape({1});
  }
  const Tensor out = f(moved);
  if (x0.dim() == 0) return out.reshape({});
  return last ? out : out.permute(inverse_of(perm)).contiguous();
}

Tensor softmax_op(const autograd::OpInfo& op, SoftmaxKind kind, const Tensor& x, int64_t dim) {
  detail::check_float(op.name, x);
  dim = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op.name);
  return autograd::record_one({
      .op = op,
      .inputs = {x},
      .forward =
          [kind, dim](const Tensors& in, auto*) {
            return Tensors{along_last(dim, in, [kind](const Tensors& m) {
              return backend_of(m[0]).softmax(kind, m[0]);
            })};
          },
      .backward =
          [kind, dim](Node& node, const Tensors& g) {
            return Tensors{along_last(dim, {node.saved_output(0), g[0]}, [kind](const Tensors& m) {
              return backend_of(m[0]).softmax_backward(kind, m[0], m[1]);
            })};
          },
      .save = {.outputs = {0}},
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_op(registry::kSoftmax, SoftmaxKind::softmax, x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_op(registry::kLogSoftmax, SoftmaxKind::log_softmax, x, dim);
}

}  // namespace reprise::ops
