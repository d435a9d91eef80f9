#include "nn/autocast.h"

#include "ops/cast.h"
#include "ops/grouped_linear.h"
#include "ops/matmul.h"

namespace reprise::nn {
namespace {

thread_local DType current = DType::f32;

bool is_16bit(DType t) { return t == DType::bf16 || t == DType::f16; }

}  // namespace

Autocast::Autocast(DType dtype) : previous_(current) {
  REPRISE_CHECK(dtype == DType::f32 || is_16bit(dtype),
                "Autocast: expected dtype bf16, f16 or f32 (no casting), got ", dtype_name(dtype));
  current = dtype;
}

Autocast::~Autocast() { current = previous_; }

DType autocast_dtype() { return current; }

Tensor autocast_operand(const Tensor& t) {
  if (!is_16bit(current) || !is_floating(t.dtype()) || is_16bit(t.dtype())) return t;
  return ops::cast(t, current);
}

Tensor autocast_linear(const Tensor& x, const Tensor& w) {
  if (!is_16bit(current)) return ops::linear(x, w);
  return ops::cast(ops::linear(autocast_operand(x), autocast_operand(w)), w.dtype());
}

Tensor autocast_grouped_linear(const Tensor& x, const Tensor& counts,
                               const std::vector<Tensor>& weights) {
  if (!is_16bit(current) || weights.empty()) return ops::grouped_linear(x, counts, weights);
  std::vector<Tensor> narrow;
  narrow.reserve(weights.size());
  for (const Tensor& w : weights) narrow.push_back(autocast_operand(w));
  return ops::cast(ops::grouped_linear(autocast_operand(x), counts, narrow), weights[0].dtype());
}

}  // namespace reprise::nn
