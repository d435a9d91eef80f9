// softmax and log_softmax: forward kernels over contiguous rows, backward
// rules that read only the saved output y, and their OpInfos.
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
// A dim other than the last is moved last (one copy in, one out), so the
// kernels only ever see rows of length R = x.size(dim).
#include "ops/softmax.h"

#include "autograd/tape.h"
#include "engine/threads.h"
#include "ops/elementwise.h"
#include "ops/row_math.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

enum class Kind { softmax, log_softmax };

// About max, subtract, exp, sum and scale per element.
double softmax_flops(const Tensors& in, const Tensors&) { return 5.0 * double(in[0].numel()); }

const autograd::OpInfo kSoftmax{"softmax", false, softmax_flops};
const autograd::OpInfo kLogSoftmax{"log_softmax", false, softmax_flops};

// x: (M, R) contiguous -> y: (M, R).
template <class T>
void forward_rows(Kind kind, const T* x, T* y, int64_t M, int64_t R) {
  threads::parallel_for(M, detail::row_grain(R), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const T* xr = x + m * R;
      T* yr = y + m * R;
      T mx = detail::row_max(xr, R);
      if (kind == Kind::softmax) {
        T sum = detail::row_sum_of<T>(
            R, [&](int64_t r) { return yr[r] = detail::row_exp(xr[r] - mx); });
        T inv = T(1) / sum;
        for (int64_t r = 0; r < R; ++r) yr[r] *= inv;
      } else {
        T sum = detail::row_sum_of<T>(R, [&](int64_t r) { return detail::row_exp(xr[r] - mx); });
        T shift = mx + std::log(sum);
        for (int64_t r = 0; r < R; ++r) yr[r] = xr[r] - shift;
      }
    }
  });
}

// y, g: (M, R) contiguous -> dx: (M, R).
template <class T>
void backward_rows(Kind kind, const T* y, const T* g, T* dx, int64_t M, int64_t R) {
  threads::parallel_for(M, detail::row_grain(R), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const T* yr = y + m * R;
      const T* gr = g + m * R;
      T* dr = dx + m * R;
      if (kind == Kind::softmax) {
        T dot = detail::row_sum_of<T>(R, [&](int64_t r) { return gr[r] * yr[r]; });
        for (int64_t r = 0; r < R; ++r) dr[r] = yr[r] * (gr[r] - dot);
      } else {
        T sum = detail::row_sum_of<T>(R, [&](int64_t r) { return gr[r]; });
        for (int64_t r = 0; r < R; ++r) dr[r] = gr[r] - detail::row_exp(yr[r]) * sum;
      }
    }
  });
}

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

// Runs f(moved inputs..., out) on tensors whose `dim` was moved last and made
// contiguous, and returns out moved back to the original layout.
template <class F>
Tensor along_last(const char* op, int64_t dim, const Tensors& ins, F f) {
  const Tensor& x0 = ins[0];
  bool last = x0.dim() == 0 || dim == x0.dim() - 1;
  std::vector<int64_t> perm = last ? std::vector<int64_t>{} : dim_last(dim, x0.dim());
  Tensors moved;
  for (const Tensor& t : ins) moved.push_back(last ? t.contiguous() : t.permute(perm).contiguous());
  Tensor out = Tensor::empty(moved[0].shape(), x0.dtype());
  int64_t R = x0.dim() == 0 ? 1 : x0.size(dim);
  int64_t M = R == 0 ? 0 : x0.numel() / R;
  dispatch_float(x0.dtype(), op, [&]<class T>() { f.template operator()<T>(moved, out, M, R); });
  return last ? out : out.permute(inverse_of(perm)).contiguous();
}

Tensor softmax_op(const autograd::OpInfo& op, Kind kind, const Tensor& x, int64_t dim) {
  detail::check_float_cpu(op.name, x);
  dim = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op.name);
  const char* name = op.name;
  return autograd::record_one({
      .op = op,
      .inputs = {x},
      .forward =
          [name, kind, dim](const Tensors& in, auto*) {
            return Tensors{
                along_last(name, dim, in,
                           [kind]<class T>(const Tensors& m, Tensor& out, int64_t M, int64_t R) {
                             forward_rows(kind, m[0].data<T>(), out.data<T>(), M, R);
                           })};
          },
      .backward =
          [name, kind, dim](Node& node, const Tensors& g) {
            return Tensors{along_last(
                name, dim, {node.saved_output(0), g[0]},
                [kind]<class T>(const Tensors& m, Tensor& out, int64_t M, int64_t R) {
                  backward_rows(kind, m[0].data<T>(), m[1].data<T>(), out.data<T>(), M, R);
                })};
          },
      .save = {.outputs = {0}},
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(kSoftmax, Kind::softmax, x, dim); }

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_op(kLogSoftmax, Kind::log_softmax, x, dim);
}

}  // namespace reprise::ops
