// rotary: the forward rotates each (i, i + half) pair of a head vector by
// its angle; the backward is the inverse rotation (the same kernel with sin
// negated). Nothing but the positions is saved.
#include "ops/rotary.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

void check_inputs(const Tensor& x, const Tensor& positions, double theta) {
  detail::check_float("rotary", x);
  REPRISE_CHECK(x.dim() == 4, "rotary: expected x of shape (B, H, T, D), got ", x.describe());
  REPRISE_CHECK(x.size(3) % 2 == 0 && x.size(3) > 0, "rotary: head dim D = ", x.size(3), " of x ",
                x.describe(), " is odd or zero (expected an even D: element i pairs with i + D/2)");
  REPRISE_CHECK(theta > 0, "rotary: expected theta > 0, got ", theta);
  detail::check_index_tensor("rotary", "positions", positions, x);
  const bool shared = positions.dim() == 1 && positions.size(0) == x.size(2);
  const bool per_batch =
      positions.dim() == 2 && positions.size(0) == x.size(0) && positions.size(1) == x.size(2);
  REPRISE_CHECK(shared || per_batch, "rotary: positions ", positions.describe(), " do not match x ",
                x.describe(), " (expected positions of shape [", x.size(2), "] or [", x.size(0),
                ", ", x.size(2), "])");
}

}  // namespace

Tensor rotary(const Tensor& x, const Tensor& positions, double theta) {
  check_inputs(x, positions, theta);
  return autograd::record_one({
      .op = registry::kRotary,
      .inputs = {x, positions},
      .forward = [theta](
                     const Tensors& in,
                     auto*) { return Tensors{backend_of(in[0]).rotary(in[0], in[1], theta, 1)}; },
      .backward =
          [theta](Node& node, const Tensors& g) {
            return Tensors{backend_of(g[0]).rotary(g[0], node.saved_input(1), theta, -1), Tensor()};
          },
      .save = {.inputs = {1}},
  });
}

Tensor rotary(const Tensor& x, int64_t start, double theta) {
  REPRISE_CHECK(x.defined() && x.dim() == 4, "rotary: expected x of shape (B, H, T, D), got ",
                x.defined() ? x.describe() : std::string("an undefined tensor"));
  Tensor positions = Tensor::arange(x.size(2));
  int64_t* p = positions.data<int64_t>();
  for (int64_t t = 0; t < x.size(2); ++t) p[t] += start;
  return rotary(x, positions.to(x.device()), theta);
}

}  // namespace reprise::ops
