#include "ops/structure.h"

#include <algorithm>

#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/check.h"
#include "ops/compare.h"
#include "ops/indexing.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/views.h"

namespace reprise::ops {
namespace {

// (R, C) bool on x's device: column - row compared with diagonal.
Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, CompareOp keep) {
  REPRISE_CHECK(x.defined() && x.dim() >= 2, op, ": expected a tensor of at least 2 dims, got ",
                x.defined() ? x.describe() : "undefined");
  const int64_t R = x.size(-2), C = x.size(-1);
  const Tensor rows = Tensor::arange(R).reshape({R, 1}).to(x.device());
  const Tensor cols = Tensor::arange(C).reshape({1, C}).to(x.device());
  return compare(keep, sub(cols, rows), double(diagonal));
}

// Elements [start, start + n) of x along dim (n may be 0).
Tensor take(const Tensor& x, int64_t dim, int64_t start, int64_t n) {
  return slice(x, dim, start, start + n);
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  return where(triangle("tril", x, diagonal, CompareOp::le), x, 0.0);
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  return where(triangle("triu", x, diagonal, CompareOp::ge), x, 0.0);
}

Tensor one_hot(const Tensor& ids, int64_t num_classes) {
  REPRISE_CHECK(ids.defined() && (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
                "one_hot: expected ids of dtype i32 or i64, got ",
                ids.defined() ? ids.describe() : "undefined");
  if (num_classes < 0) {
    REPRISE_CHECK(ids.numel() > 0, "one_hot: cannot infer the class count from empty ids ",
                  ids.describe(), "; pass num_classes");
    const std::vector<int64_t> values = ids.to_vector<int64_t>();  // torch reads them too
    num_classes = 1 + *std::max_element(values.begin(), values.end());
  }
  if (const auto bad = detail::first_out_of_range(ids, num_classes)) {
    REPRISE_FAIL("one_hot: id ", bad->first, " at flat position ", bad->second, " of ",
                 ids.describe(), " is outside [0, ", num_classes, ")");
  }
  const Tensor classes = Tensor::arange(num_classes, ids.dtype()).to(ids.device());
  return cast(eq(unsqueeze(ids, -1), classes), DType::i64);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  REPRISE_CHECK(x.defined(), "pad: undefined x");
  REPRISE_CHECK(pads.size() % 2 == 0 && int64_t(pads.size()) <= 2 * x.dim(), "pad: ", pads.size(),
                " widths for ", x.describe(), ": expected an even count, at most two per dim");
  Tensor y = x;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    const int64_t dim = x.dim() - 1 - int64_t(i);
    const int64_t before = pads[2 * i], after = pads[2 * i + 1];
    const int64_t size = y.size(dim);
    REPRISE_CHECK(size + std::min<int64_t>(before, 0) + std::min<int64_t>(after, 0) >= 0,
                  "pad: widths (", before, ", ", after, ") crop more than dim ", dim, " of ",
                  x.describe(), " holds");
    // Crop first (negative widths), then add constant blocks.
    y = take(y, dim, std::max<int64_t>(-before, 0),
             size + std::min<int64_t>(before, 0) + std::min<int64_t>(after, 0));
    std::vector<Tensor> parts;
    const auto block = [&](int64_t n) {
      Shape shape = y.shape();
      shape[size_t(dim)] = n;
      return Tensor::full(shape, value, y.dtype(), y.device());
    };
    if (before > 0) parts.push_back(block(before));
    parts.push_back(y);
    if (after > 0) parts.push_back(block(after));
    if (parts.size() > 1) y = cat(parts, dim);
  }
  return y;
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  REPRISE_CHECK(x.defined(), "flip: undefined x");
  Tensor y = x;
  for (int64_t d : dims) {
    d = wrap_dim(d, x.dim(), "flip");
    const int64_t n = x.size(d);
    const Tensor reversed = sub(Tensor::full({n}, double(n - 1), DType::i64), Tensor::arange(n));
    y = index_select(y, d, reversed.to(x.device()));
  }
  return y;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  REPRISE_CHECK(x.defined(), "roll: undefined x");
  if (dims.empty()) {
    REPRISE_CHECK(shifts.size() == 1, "roll: with no dims, one shift (got ", shifts.size(), ")");
    return reshape(roll(reshape(x, {-1}), shifts, {0}), x.shape());
  }
  REPRISE_CHECK(shifts.size() == dims.size(), "roll: ", shifts.size(), " shifts for ", dims.size(),
                " dims");
  Tensor y = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    const int64_t n = x.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;  // the last s elements come first
    if (s == 0) continue;
    y = cat({take(y, d, n - s, s), take(y, d, 0, n - s)}, d);
  }
  return y;
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  REPRISE_CHECK(x.defined(), "repeat: undefined x");
  REPRISE_CHECK(int64_t(repeats.size()) >= x.dim(), "repeat: ", repeats.size(), " repeats for ",
                x.describe(), ": give at least one per dim");
  for (int64_t r : repeats)
    REPRISE_CHECK(r >= 0, "repeat: negative repeat ", r, " for ", x.describe());
  // (s0, s1, ...) viewed as (1, s0, 1, s1, ...), expanded to (r0, s0, r1,
  // s1, ...) and merged pairwise to (r0 s0, r1 s1, ...).
  const size_t lead = repeats.size() - size_t(x.dim());
  Shape interleaved, expanded, merged;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t size = i < lead ? 1 : x.size(int64_t(i - lead));
    interleaved.insert(interleaved.end(), {1, size});
    expanded.insert(expanded.end(), {repeats[i], size});
    merged.push_back(repeats[i] * size);
  }
  return reshape(contiguous(expand(reshape(x, interleaved), expanded)), merged);
}

}  // namespace reprise::ops
