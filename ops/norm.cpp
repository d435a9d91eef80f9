// rmsnorm and layernorm: fused forward kernels saving per-row statistics,
// fused backward rules, OpInfos. M = rows (every dim but the last), C = the
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
#include "engine/threads.h"
#include "ops/elementwise.h"
#include "ops/row_math.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Square-and-add, scale, weight.
double rmsnorm_flops(const Tensors& in, const Tensors&) { return 4.0 * double(in[0].numel()); }
// Mean, centred square-and-add, centre, scale, weight, bias.
double layernorm_flops(const Tensors& in, const Tensors&) { return 7.0 * double(in[0].numel()); }

const autograd::OpInfo kRmsnorm{"rmsnorm", false, rmsnorm_flops};
const autograd::OpInfo kLayernorm{"layernorm", false, layernorm_flops};

// Raises unless p (w or b) is a (C) vector matching x's last dim, dtype and device.
void check_param(const char* op, const char* what, const Tensor& x, const Tensor& p) {
  REPRISE_CHECK(p.defined(), op, ": undefined ", what);
  REPRISE_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", what, " ", p.describe(),
                " does not match the last dim of x ", x.describe(), " (expected ", what,
                " of shape [", x.size(-1), "])");
  detail::check_same_dtype_device(op, x, p);
}

void check_x(const char* op, const Tensor& x) {
  detail::check_float_cpu(op, x);
  REPRISE_CHECK(x.dim() >= 1 && x.size(-1) > 0, op,
                ": expected x of shape (..., C) with C > 0, got ", x.describe());
}

// Per-row statistics have x's shape without the last dim: (...).
Shape rows_shape(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

// Backward rows are processed in fixed chunks of kChunkRows. Each chunk sums
// its rows' contributions to dw (and db) into its own partial row, and the
// partials are added in chunk order afterwards: the chunking depends on the
// row count only, never on the thread count, so dw is deterministic.
constexpr int64_t kChunkRows = 32;

int64_t num_chunks(int64_t M) { return (M + kChunkRows - 1) / kChunkRows; }

int64_t chunk_grain(int64_t C) { return std::max<int64_t>(1, 16384 / (kChunkRows * C)); }

// partials: (chunks, C) -> out: (C), summed over chunks in chunk order.
template <class T>
void sum_partials(const std::vector<T>& partials, int64_t chunks, int64_t C, T* out) {
  for (int64_t c = 0; c < C; ++c) out[c] = T(0);
  for (int64_t k = 0; k < chunks; ++k) {
    const T* p = partials.data() + k * C;
    for (int64_t c = 0; c < C; ++c) out[c] += p[c];
  }
}

// ---- rmsnorm -------------------------------------------------------------------

// x: (M, C), w: (C) -> {y (M, C), rstd (M)}.
Tensors rmsnorm_forward(const Tensor& x_in, const Tensor& w_in, double eps) {
  Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty(rows_shape(x.shape()), x.dtype());
  dispatch_float(x.dtype(), "rmsnorm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* py = y.data<T>();
    T* pr = rstd.data<T>();
    threads::parallel_for(M, detail::row_grain(C), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* xr = px + m * C;
        T* yr = py + m * C;
        T ms = detail::row_sum_of<T>(C, [&](int64_t c) { return xr[c] * xr[c]; }) / T(C);
        T r = T(1) / std::sqrt(ms + T(eps));
        pr[m] = r;
        // HF's order: normalise first, then weight.
        for (int64_t c = 0; c < C; ++c) yr[c] = pw[c] * (xr[c] * r);
      }
    });
  });
  return {y, rstd};
}

// {dx, dw} from the saved x, w (when dx is needed), rstd and g: (M, C).
Tensors rmsnorm_backward(Node& node, const Tensor& g_in) {
  const bool need_dx = node.needs_input_grad(0), need_dw = node.needs_input_grad(1);
  Tensor x = node.saved_input(0).contiguous(), rstd = node.saved_output(1).contiguous();
  Tensor w = need_dx ? node.saved_input(1).contiguous() : Tensor();
  Tensor g = g_in.contiguous();
  const int64_t C = x.size(-1), M = x.numel() / C, chunks = num_chunks(M);
  Tensor dx = need_dx ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
  Tensor dw = need_dw ? Tensor::empty({C}, x.dtype()) : Tensor();
  dispatch_float(x.dtype(), "rmsnorm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pg = g.data<T>();
    const T* pr = rstd.data<T>();
    const T* pw = need_dx ? w.data<T>() : nullptr;
    T* pdx = need_dx ? dx.data<T>() : nullptr;
    std::vector<T> partial(need_dw ? size_t(chunks * C) : 0, T(0));
    threads::parallel_for(chunks, chunk_grain(C), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        T* part = need_dw ? partial.data() + k * C : nullptr;
        for (int64_t m = k * kChunkRows; m < std::min(M, (k + 1) * kChunkRows); ++m) {
          const T* xr = px + m * C;
          const T* gr = pg + m * C;
          const T r = pr[m];
          if (!pdx) {
            for (int64_t c = 0; c < C; ++c) part[c] += gr[c] * (xr[c] * r);
            continue;
          }
          T* dr = pdx + m * C;
          T dot = detail::row_sum_of<T>(C, [&](int64_t c) { return pw[c] * gr[c] * xr[c]; });
          const T s = r * r * r * dot / T(C);
          if (part) {  // dx and dw in one pass over the row
            for (int64_t c = 0; c < C; ++c) {
              dr[c] = r * pw[c] * gr[c] - s * xr[c];
              part[c] += gr[c] * (xr[c] * r);
            }
          } else {
            for (int64_t c = 0; c < C; ++c) dr[c] = r * pw[c] * gr[c] - s * xr[c];
          }
        }
      }
    });
    if (need_dw) sum_partials(partial, chunks, C, dw.data<T>());
  });
  return {dx, dw};
}

// ---- layernorm -----------------------------------------------------------------

// x: (M, C), w: (C), b: (C) or undefined -> {y (M, C), mean (M), rstd (M)}.
Tensors layernorm_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, double eps) {
  Tensor x = x_in.contiguous(), w = w_in.contiguous();
  Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
  const int64_t C = x.size(-1), M = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty(rows_shape(x.shape()), x.dtype());
  Tensor rstd = Tensor::empty(rows_shape(x.shape()), x.dtype());
  dispatch_float(x.dtype(), "layernorm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    T* py = y.data<T>();
    T* pm = mean.data<T>();
    T* pr = rstd.data<T>();
    threads::parallel_for(M, detail::row_grain(C), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const T* xr = px + m * C;
        T* yr = py + m * C;
        // Two passes over a row that is in cache: the centred sum of
        // squares does not cancel the way E[x^2] - E[x]^2 does.
        const T mu = detail::row_sum_of<T>(C, [&](int64_t c) { return xr[c]; }) / T(C);
        T var = detail::row_sum_of<T>(C, [&](int64_t c) { return (xr[c] - mu) * (xr[c] - mu); });
        const T r = T(1) / std::sqrt(var / T(C) + T(eps));
        pm[m] = mu;
        pr[m] = r;
        if (pb) {
          for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mu) * r * pw[c] + pb[c];
        } else {
          for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mu) * r * pw[c];
        }
      }
    });
  });
  return {y, mean, rstd};
}

// {dx, dw, db} from the saved x, w (when dx is needed), mean, rstd and g: (M, C).
Tensors layernorm_backward(Node& node, const Tensor& g_in) {
  const bool need_dx = node.needs_input_grad(0), need_dw = node.needs_input_grad(1),
             need_db = node.needs_input_grad(2);
  Tensor g = g_in.contiguous();
  const int64_t C = g.size(-1), M = g.numel() / C, chunks = num_chunks(M);
  Tensor x, w, mean, rstd;
  if (need_dx || need_dw) {
    x = node.saved_input(0).contiguous();
    mean = node.saved_output(1).contiguous();
    rstd = node.saved_output(2).contiguous();
  }
  if (need_dx) w = node.saved_input(1).contiguous();
  Tensor dx = need_dx ? Tensor::empty(g.shape(), g.dtype()) : Tensor();
  Tensor dw = need_dw ? Tensor::empty({C}, g.dtype()) : Tensor();
  Tensor db = need_db ? Tensor::empty({C}, g.dtype()) : Tensor();
  dispatch_float(g.dtype(), "layernorm", [&]<class T>() {
    const T* pg = g.data<T>();
    const T* px = x.defined() ? x.data<T>() : nullptr;
    const T* pm = x.defined() ? mean.data<T>() : nullptr;
    const T* pr = x.defined() ? rstd.data<T>() : nullptr;
    const T* pw = need_dx ? w.data<T>() : nullptr;
    T* pdx = need_dx ? dx.data<T>() : nullptr;
    std::vector<T> partial_w(need_dw ? size_t(chunks * C) : 0, T(0));
    std::vector<T> partial_b(need_db ? size_t(chunks * C) : 0, T(0));
    threads::parallel_for(chunks, chunk_grain(C), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        T* part_w = need_dw ? partial_w.data() + k * C : nullptr;
        T* part_b = need_db ? partial_b.data() + k * C : nullptr;
        for (int64_t m = k * kChunkRows; m < std::min(M, (k + 1) * kChunkRows); ++m) {
          const T* gr = pg + m * C;
          if (part_b) {
            for (int64_t c = 0; c < C; ++c) part_b[c] += gr[c];
          }
          if (!px) continue;
          const T* xr = px + m * C;
          const T mu = pm[m], r = pr[m];
          if (pdx) {
            T* dr = pdx + m * C;
            const T a = detail::row_sum_of<T>(C, [&](int64_t c) { return pw[c] * gr[c]; }) / T(C);
            const T bb = detail::row_sum_of<T>(
                             C, [&](int64_t c) { return pw[c] * gr[c] * ((xr[c] - mu) * r); }) /
                         T(C);
            for (int64_t c = 0; c < C; ++c) dr[c] = r * (pw[c] * gr[c] - a - (xr[c] - mu) * r * bb);
          }
          if (part_w) {
            for (int64_t c = 0; c < C; ++c) part_w[c] += gr[c] * ((xr[c] - mu) * r);
          }
        }
      }
    });
    if (need_dw) sum_partials(partial_w, chunks, C, dw.data<T>());
    if (need_db) sum_partials(partial_b, chunks, C, db.data<T>());
  });
  return {dx, dw, db};
}

}  // namespace

Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  check_x("rmsnorm", x);
  check_param("rmsnorm", "w", x, w);
  // dx reads x, w and rstd; dw reads x and rstd.
  autograd::SaveSpec save{.inputs = {0}, .outputs = {1}};
  if (x.requires_grad()) save.inputs.push_back(1);
  return autograd::record_one({
      .op = kRmsnorm,
      .inputs = {x, w},
      .forward = [eps](const Tensors& in, auto*) { return rmsnorm_forward(in[0], in[1], eps); },
      .backward = [](Node& node, const Tensors& g) { return rmsnorm_backward(node, g[0]); },
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
      .op = kLayernorm,
      .inputs = {x, w, b},
      .forward = [eps](const Tensors& in,
                       auto*) { return layernorm_forward(in[0], in[1], in[2], eps); },
      .backward = [](Node& node, const Tensors& g) { return layernorm_backward(node, g[0]); },
      .save = save,
      .num_public_outputs = 1,
  });
}

}  // namespace reprise::ops
