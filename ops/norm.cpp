// rmsnorm and layernorm: checks, what each saves (per-row statistics) and
// its fused backward kernel. M = rows (every dim but the last), C = the
// normalised last dim; r = rstd of a row.
//
// rmsnorm:   y = w * (x * r),           r = (sum(x^2) / C + eps)^-1/2
//            dx = r * w * g - x * r^3 * sum(w * g * x) / C
//            dw = sum over rows of g * x * r
// layernorm: y = xhat * w + b,          xhat = (x - mean) * r
//            dx = r * (w * g - mean(w * g) - xhat * mean(w * g * xhat))
//            dw = sum over rows of g * xhat,  db = sum over rows of g
#include "ops/norm.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Raises unless p (w or b) is a (C) vector matching x's last dim, dtype and device.
void check_param(const char* op, const char* what, const Tensor& x, const Tensor& p) {
  REPRISE_CHECK(p.defined(), op, ": undefined ", what);
  REPRISE_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", what, " ", p.describe(),
                " does not match the last dim of x ", x.describe(), " (expected ", what,
                " of shape [", x.size(-1), "])");
  detail::check_same_dtype_device(op, x, p);
}

void check_x(const char* op, const Tensor& x) {
  detail::check_float(op, x);
  REPRISE_CHECK(x.dim() >= 1 && x.size(-1) > 0, op,
                ": expected x of shape (..., C) with C > 0, got ", x.describe());
}

}  // namespace

Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  check_x("rmsnorm", x);
  check_param("rmsnorm", "w", x, w);
  // dx reads x, w and rstd; dw reads x and rstd.
  autograd::SaveSpec save{.inputs = {0}, .outputs = {1}};
  if (x.requires_grad()) save.inputs.push_back(1);
  return autograd::record_one({
      .op = registry::kRmsnorm,
      .inputs = {x, w},
      .forward = [eps](const Tensors& in,
                       auto*) { return backend_of(in[0]).rmsnorm(in[0], in[1], eps); },
      .backward =
          [](Node& node, const Tensors& g) {
            const bool need_dx = node.needs_input_grad(0), need_dw = node.needs_input_grad(1);
            return backend_of(g[0]).rmsnorm_backward(node.saved_input(0),
                                                     need_dx ? node.saved_input(1) : Tensor(),
                                                     node.saved_output(1), g[0], need_dx, need_dw);
          },
      .save = save,
      .num_public_outputs = 1,
  });
}

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  check_x("layernorm", x);
  check_param("layernorm", "w", x, w);
  if (b.defined()) check_param("layernorm", "b", x, b);
  // dx reads x, w, mean and rstd; dw reads x, mean and rstd; db reads only g.
  autograd::SaveSpec save;
  if (x.requires_grad() || w.requires_grad()) save = {.inputs = {0}, .outputs = {1, 2}};
  if (x.requires_grad()) save.inputs.push_back(1);
  return autograd::record_one({
      .op = registry::kLayernorm,
      .inputs = {x, w, b},
      .forward = [eps](const Tensors& in,
                       auto*) { return backend_of(in[0]).layernorm(in[0], in[1], in[2], eps); },
      .backward =
          [](Node& node, const Tensors& g) {
            const bool need_dx = node.needs_input_grad(0), need_dw = node.needs_input_grad(1),
                       need_db = node.needs_input_grad(2);
            const bool stats = need_dx || need_dw;
            return backend_of(g[0]).layernorm_backward(
                stats ? node.saved_input(0) : Tensor(), need_dx ? node.saved_input(1) : Tensor(),
                stats ? node.saved_output(1) : Tensor(), stats ? node.saved_output(2) : Tensor(),
                g[0], need_dx, need_dw, need_db);
          },
      .save = save,
      .num_public_outputs = 1,
  });
}

}  // namespace reprise::ops
