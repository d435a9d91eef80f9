// Random ops. Creation ops (rand, randn, bernoulli) have no inputs, so
// nothing is recorded for them: the tape never replays a leaf. dropout is
// recorded with its reservation and saves no tensor; forward and backward
// are the same kernel (Backend::dropout) over the same words.
#include "ops/random.h"

#include <cmath>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"
#include "ops/check.h"
#include "ops/registry.h"
#include "rng/distributions.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

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

// Runs fill(dst) over t's elements in row-major order: directly into a
// contiguous t, through a contiguous buffer otherwise (a strided view).
template <class Fill>
void fill_elements(const char* op, Tensor& t, const Fill& fill) {
  detail::check_float(op, t);
  NoGradGuard no_grad;
  Tensor dst = t.is_contiguous() ? t : Tensor::empty(t.shape(), t.dtype(), t.device());
  fill(dst);
  if (dst.is_same(t)) {
    t.storage()->bump_version();
  } else {
    t.copy_(dst);
  }
}

Tensor created(const char* op, const Shape& shape, DType dtype, const auto& fill) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_elements(op, t, fill);
  return t;
}

}  // namespace

Tensor rand(const Shape& shape, rng::Generator& gen, std::string_view stream, DType dtype) {
  check_float_dtype("rand", dtype);
  const rng::Reservation r = gen.reserve(stream, uniform_words(dtype, numel(shape)));
  return created("rand", shape, dtype,
                 [&r](const Tensor& t) { backend_of(t).fill_uniform(t, r, 0.0, 1.0); });
}

Tensor randn(const Shape& shape, rng::Generator& gen, std::string_view stream, DType dtype) {
  check_float_dtype("randn", dtype);
  const rng::Reservation r = gen.reserve(stream, normal_words(dtype, numel(shape)));
  return created("randn", shape, dtype,
                 [&r](const Tensor& t) { backend_of(t).fill_normal(t, r, 0.0, 1.0); });
}

Tensor bernoulli(const Shape& shape, double p, rng::Generator& gen, std::string_view stream,
                 DType dtype) {
  check_float_dtype("bernoulli", dtype);
  check_probability("bernoulli", p);
  const rng::Reservation r = gen.reserve(stream, rng::bernoulli_words(uint64_t(numel(shape))));
  return created("bernoulli", shape, dtype,
                 [&r, p](const Tensor& t) { backend_of(t).fill_bernoulli(t, r, p); });
}

Tensor dropout(const Tensor& x, double p, rng::Generator& gen, bool training,
               std::string_view stream) {
  detail::check_float("dropout", x);
  check_probability("dropout", p);
  if (!training || p == 0.0) return x;
  return autograd::record_one({
      .op = registry::kDropout,
      .inputs = {x},
      .forward =
          [p](const Tensors& in, const rng::Reservation* r) {
            return Tensors{backend_of(in[0]).dropout(in[0], p, *r)};
          },
      // The mask is a function of the reservation: dx = dropout(dy).
      .backward =
          [p](Node& node, const Tensors& g) {
            return Tensors{backend_of(g[0]).dropout(g[0], p, *node.rng)};
          },
      .rng = gen.reserve(stream, rng::bernoulli_words(uint64_t(x.numel()))),
  });
}

Tensor& normal_(Tensor& t, double mean, double std, rng::Generator& gen, std::string_view stream) {
  detail::check_float("normal_", t);
  const rng::Reservation r = gen.reserve(stream, normal_words(t.dtype(), t.numel()));
  fill_elements("normal_", t, [&](const Tensor& d) { backend_of(d).fill_normal(d, r, mean, std); });
  return t;
}

Tensor& uniform_(Tensor& t, double low, double high, rng::Generator& gen, std::string_view stream) {
  detail::check_float("uniform_", t);
  REPRISE_CHECK(low <= high, "uniform_: expected low <= high, got [", low, ", ", high, "]");
  const rng::Reservation r = gen.reserve(stream, uniform_words(t.dtype(), t.numel()));
  fill_elements("uniform_", t,
                [&](const Tensor& d) { backend_of(d).fill_uniform(d, r, low, high); });
  return t;
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, rng::Generator& gen,
                      std::string_view stream) {
  detail::check_float("trunc_normal_", t);
  REPRISE_CHECK(std > 0 && std::isfinite(a) && std::isfinite(b) && a < b,
                "trunc_normal_: expected std > 0 and finite a < b, got std ", std, ", [", a, ", ",
                b, "]");
  const rng::Reservation r = gen.reserve(stream, rng::uniform_words<double>(uint64_t(t.numel())));
  fill_elements("trunc_normal_", t,
                [&](const Tensor& d) { backend_of(d).fill_trunc_normal(d, r, mean, std, a, b); });
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
