// rotary: the forward rotates each (i, i + half) pair of a head vector by
// its angle; the backward is the inverse rotation (the same kernel with sin
// negated). Nothing but the positions and the frequencies is saved. bf16
// x (q and k under bf16 autocast) rotates in f32 with f32 frequencies, each
// result rounded once to bf16.
#include "ops/rotary.h"

#include <cmath>

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// x: a defined f32/f64/bf16 tensor (B, H, T, D) with D even.
void check_x(const Tensor& x) {
  detail::check_float_or_bf16("rotary", x);
  REPRISE_CHECK(x.dim() == 4, "rotary: expected x of shape (B, H, T, D), got ", x.describe());
  REPRISE_CHECK(x.size(3) % 2 == 0 && x.size(3) > 0, "rotary: head dim D = ", x.size(3), " of x ",
                x.describe(), " is odd or zero (expected an even D: element i pairs with i + D/2)");
}

void check_inputs(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                  double scaling) {
  check_x(x);
  REPRISE_CHECK(inv_freq.defined() && inv_freq.dim() == 1 && inv_freq.size(0) == x.size(3) / 2 &&
                    inv_freq.dtype() == compute_dtype(x.dtype()) && inv_freq.device() == x.device(),
                "rotary: expected inv_freq of shape [", x.size(3) / 2, "], dtype ",
                dtype_name(compute_dtype(x.dtype())), " and x's device for x ", x.describe(),
                ", got ",
                inv_freq.defined() ? inv_freq.describe() : std::string("an undefined tensor"));
  REPRISE_CHECK(std::isfinite(scaling) && scaling > 0, "rotary: expected a positive scaling, got ",
                scaling);
  detail::check_index_tensor("rotary", "positions", positions, x);
  const bool shared = positions.dim() == 1 && positions.size(0) == x.size(2);
  const bool per_batch =
      positions.dim() == 2 && positions.size(0) == x.size(0) && positions.size(1) == x.size(2);
  REPRISE_CHECK(shared || per_batch, "rotary: positions ", positions.describe(), " do not match x ",
                x.describe(), " (expected positions of shape [", x.size(2), "] or [", x.size(0),
                ", ", x.size(2), "])");
}

template <class T>
Tensor default_inv_freq(int64_t D, double theta) {
  Tensor f = Tensor::empty({D / 2}, dtype_of<T>());
  T* p = f.data<T>();
  for (int64_t i = 0; i < D / 2; ++i) p[i] = T(1) / std::pow(T(theta), T(2 * i) / T(D));
  return f;
}

}  // namespace

Tensor rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq, double scaling) {
  check_inputs(x, positions, inv_freq, scaling);
  return autograd::record_one({
      .op = registry::kRotary,
      .inputs = {x, positions, inv_freq},
      .forward =
          [scaling](const Tensors& in, auto*) {
            return Tensors{backend_of(in[0]).rotary(in[0], in[1], in[2], scaling, 1)};
          },
      .backward =
          [scaling](Node& node, const Tensors& g) {
            return Tensors{backend_of(g[0]).rotary(g[0], node.saved_input(1), node.saved_input(2),
                                                   scaling, -1),
                           Tensor(), Tensor()};
          },
      .save = {.inputs = {1, 2}},
  });
}

Tensor rope_inv_freq(int64_t D, double theta, DType dtype) {
  REPRISE_CHECK(D > 0 && D % 2 == 0, "rope_inv_freq: expected an even head dim D > 0, got ", D);
  REPRISE_CHECK(std::isfinite(theta) && theta > 0, "rope_inv_freq: expected theta > 0, got ",
                theta);
  REPRISE_CHECK(dtype == DType::f32 || dtype == DType::f64,
                "rope_inv_freq: expected dtype f32 or f64, got ", dtype_name(dtype));
  return dtype == DType::f32 ? default_inv_freq<float>(D, theta)
                             : default_inv_freq<double>(D, theta);
}

namespace {
// The default rope's frequencies for x (checked first, so errors name x).
Tensor default_inv_freq_for(const Tensor& x, double theta) {
  check_x(x);
  return rope_inv_freq(x.size(3), theta, compute_dtype(x.dtype())).to(x.device());
}
}  // namespace

Tensor rotary(const Tensor& x, const Tensor& positions, double theta) {
  return rotary(x, positions, default_inv_freq_for(x, theta));
}

Tensor rotary(const Tensor& x, int64_t start, const Tensor& inv_freq, double scaling) {
  check_x(x);
  Tensor positions = Tensor::arange(x.size(2));
  int64_t* p = positions.data<int64_t>();
  for (int64_t t = 0; t < x.size(2); ++t) p[t] += start;
  return rotary(x, positions.to(x.device()), inv_freq, scaling);
}

Tensor rotary(const Tensor& x, int64_t start, double theta) {
  return rotary(x, start, default_inv_freq_for(x, theta));
}

}  // namespace reprise::ops
