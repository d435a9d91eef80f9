// Random ops. Creation ops (rand, randn, bernoulli) have no inputs, so
// nothing is recorded for them: the tape never replays a leaf. dropout is
// recorded with its reservation and saves no tensor; forward and backward
// are the same kernel (rng::dropout) over the same words.
#include "ops/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>
#include <vector>

#include "autograd/tape.h"
#include "engine/grad_mode.h"
#include "engine/threads.h"
#include "ops/elementwise.h"
#include "rng/distributions.h"
#include "rng/fill.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

const autograd::OpInfo kDropout{"dropout", /*is_random=*/true};

// The fills share their chunks out over the engine's thread pool.
constexpr rng::ParallelFor kPool = &threads::parallel_for;

void check_float_dtype(const char* op, DType dtype) {
  REPRISE_CHECK(dtype == DType::f32 || dtype == DType::f64, op, ": expected dtype f32 or f64, got ",
                dtype_name(dtype));
}

void check_probability(const char* op, double p) {
  REPRISE_CHECK(p >= 0.0 && p <= 1.0, op, ": expected a probability in [0, 1], got ", p);
}

// Words a fill of n elements of `dtype` reads.
uint64_t uniform_words(DType dtype, int64_t n) {
  return dtype == DType::f32 ? rng::uniform_words<float>(uint64_t(n))
                             : rng::uniform_words<double>(uint64_t(n));
}
uint64_t normal_words(DType dtype, int64_t n) {
  return dtype == DType::f32 ? rng::normal_words<float>(uint64_t(n))
                             : rng::normal_words<double>(uint64_t(n));
}

// Runs fill(T* out, n) over t's elements in row-major order: directly into
// a contiguous t, through a contiguous buffer otherwise (a strided view).
template <class Fill>
void fill_elements(const char* op, Tensor& t, const Fill& fill) {
  detail::check_float_cpu(op, t);
  NoGradGuard no_grad;
  Tensor dst = t.is_contiguous() ? t : Tensor::empty(t.shape(), t.dtype());
  dispatch_float(t.dtype(), op, [&]<class T>() { fill(dst.data<T>(), dst.numel()); });
  if (!dst.is_same(t)) t.copy_(dst);
}

Tensor created(const char* op, const Shape& shape, DType dtype, auto fill) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_elements(op, t, fill);
  return t;
}

Tensor dropout_kernel(const Tensor& x, double p, const rng::Reservation& r) {
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "dropout", [&]<class T>() {
    rng::dropout(xc.data<T>(), y.data<T>(), xc.numel(), p, r, kPool);
  });
  return y;
}

// Phi^-1(p) for p in (0, 1): Acklam's rational approximation (relative
// error < 1.2e-9), then one Halley step on Phi(x) - p, which brings it to
// double precision.
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x;
  if (p < kLow || p > 1 - kLow) {
    // Tails: a rational function of sqrt(-2 log q), q the nearer tail mass.
    const double q = std::sqrt(-2 * std::log(p < kLow ? p : 1 - p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    if (p > 1 - kLow) x = -x;
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

Tensor rand(const Shape& shape, rng::Generator& gen, std::string_view stream, DType dtype) {
  check_float_dtype("rand", dtype);
  const rng::Reservation r = gen.reserve(stream, uniform_words(dtype, numel(shape)));
  return created("rand", shape, dtype,
                 [&r](auto* out, int64_t n) { rng::fill_uniform(out, n, r, kPool); });
}

Tensor randn(const Shape& shape, rng::Generator& gen, std::string_view stream, DType dtype) {
  check_float_dtype("randn", dtype);
  const rng::Reservation r = gen.reserve(stream, normal_words(dtype, numel(shape)));
  return created("randn", shape, dtype,
                 [&r](auto* out, int64_t n) { rng::fill_normal(out, n, r, kPool); });
}

Tensor bernoulli(const Shape& shape, double p, rng::Generator& gen, std::string_view stream,
                 DType dtype) {
  check_float_dtype("bernoulli", dtype);
  check_probability("bernoulli", p);
  const rng::Reservation r = gen.reserve(stream, rng::bernoulli_words(uint64_t(numel(shape))));
  return created("bernoulli", shape, dtype,
                 [&r, p](auto* out, int64_t n) { rng::fill_bernoulli(out, n, p, r, kPool); });
}

Tensor dropout(const Tensor& x, double p, rng::Generator& gen, bool training,
               std::string_view stream) {
  detail::check_float_cpu("dropout", x);
  check_probability("dropout", p);
  if (!training || p == 0.0) return x;
  return autograd::record_one({
      .op = kDropout,
      .inputs = {x},
      .forward = [p](const Tensors& in,
                     const rng::Reservation* r) { return Tensors{dropout_kernel(in[0], p, *r)}; },
      // The mask is a function of the reservation: dx = dropout(dy).
      .backward = [p](Node& node,
                      const Tensors& g) { return Tensors{dropout_kernel(g[0], p, *node.rng)}; },
      .rng = gen.reserve(stream, rng::bernoulli_words(uint64_t(x.numel()))),
  });
}

Tensor& normal_(Tensor& t, double mean, double std, rng::Generator& gen, std::string_view stream) {
  detail::check_float_cpu("normal_", t);
  const rng::Reservation r = gen.reserve(stream, normal_words(t.dtype(), t.numel()));
  fill_elements("normal_", t, [&](auto* out, int64_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    rng::fill_normal(out, n, r, kPool);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(out[i], T(std), T(mean));
  });
  return t;
}

Tensor& uniform_(Tensor& t, double low, double high, rng::Generator& gen, std::string_view stream) {
  detail::check_float_cpu("uniform_", t);
  REPRISE_CHECK(low <= high, "uniform_: expected low <= high, got [", low, ", ", high, "]");
  const rng::Reservation r = gen.reserve(stream, uniform_words(t.dtype(), t.numel()));
  fill_elements("uniform_", t, [&](auto* out, int64_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    rng::fill_uniform(out, n, r, kPool);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(out[i], T(high - low), T(low));
  });
  return t;
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, rng::Generator& gen,
                      std::string_view stream) {
  detail::check_float_cpu("trunc_normal_", t);
  REPRISE_CHECK(std > 0 && std::isfinite(a) && std::isfinite(b) && a < b,
                "trunc_normal_: expected std > 0 and finite a < b, got std ", std, ", [", a, ", ",
                b, "]");
  const rng::Reservation r = gen.reserve(stream, rng::uniform_words<double>(uint64_t(t.numel())));
  const double lo = normal_cdf((a - mean) / std), hi = normal_cdf((b - mean) / std);
  fill_elements("trunc_normal_", t, [&](auto* out, int64_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    std::vector<double> u(static_cast<size_t>(n));
    rng::fill_uniform(u.data(), n, r, kPool);
    for (int64_t i = 0; i < n; ++i) {
      // A uniform on (lo, hi], mapped through Phi^-1; the clamp absorbs the
      // rounding at the ends (hi can round to 1).
      const double v = lo + (hi - lo) * u[size_t(i)];
      const double x = v < 1.0 ? mean + std * normal_quantile(v) : b;
      out[i] = T(std::clamp(x, a, b));
    }
  });
  return t;
}

Tensor& kaiming_uniform_(Tensor& t, double a, rng::Generator& gen, std::string_view stream) {
  REPRISE_CHECK(t.defined() && t.dim() >= 2,
                "kaiming_uniform_: expected at least 2 dimensions, got ",
                t.defined() ? t.describe() : std::string("an undefined tensor"));
  double fan_in = 1;
  for (int64_t i = 1; i < t.dim(); ++i) fan_in *= double(t.shape()[size_t(i)]);
  REPRISE_CHECK(fan_in > 0, "kaiming_uniform_: ", t.describe(), " has fan_in 0");
  const double bound = std::sqrt(2.0 / (1 + a * a)) * std::sqrt(3.0 / fan_in);
  return uniform_(t, -bound, bound, gen, stream);
}

}  // namespace reprise::ops
