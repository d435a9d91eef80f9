#include "nn/autocast.h"

#include <unordered_map>

#include "ops/cast.h"
#include "ops/grouped_linear.h"
#include "ops/matmul.h"

namespace reprise::nn {
namespace {

thread_local DType current = DType::f32, current_attention = DType::f32;

void check_dtype(DType dtype, const char* what) {
  REPRISE_CHECK(dtype == DType::f32 || is_16bit_float(dtype), "Autocast: expected ", what,
                " dtype bf16, f16 or f32 (no casting), got ", dtype_name(dtype));
}

}  // namespace

Autocast::Autocast(DType dtype, DType attention)
    : previous_(current), previous_attention_(current_attention) {
  check_dtype(dtype, "projection");
  check_dtype(attention, "attention");
  current = dtype;
  current_attention = attention;
}

Autocast::~Autocast() {
  current = previous_;
  current_attention = previous_attention_;
}

DType autocast_dtype() { return current; }
DType autocast_attention_dtype() { return current_attention; }

Tensor autocast_operand(const Tensor& t) {
  if (!is_16bit_float(current) || !is_floating(t.dtype()) || is_16bit_float(t.dtype())) return t;
  return ops::cast(t, current);
}

Tensor widened(const Tensor& t) { return is_16bit_float(t.dtype()) ? ops::cast(t, DType::f32) : t; }

Tensor autocast_product(const Tensor& x, const Tensor& w) {
  return ops::linear(autocast_operand(x), autocast_operand(w));
}

Tensor autocast_bf16_product(const Tensor& x, const Tensor& w) {
  return current == DType::bf16 ? autocast_product(x, w) : autocast_linear(x, w);
}

Tensor autocast_linear(const Tensor& x, const Tensor& w) {
  if (!is_16bit_float(current)) return ops::linear(x, w);
  return ops::cast(autocast_product(x, w), w.dtype());
}

Tensor autocast_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const ops::AttentionOptions& options) {
  const DType dt = current_attention;
  if (!is_16bit_float(dt) || is_16bit_float(q.dtype()))
    return ops::scaled_dot_product_attention(q, k, v, options);
  return ops::cast(ops::scaled_dot_product_attention(ops::cast(q, dt), ops::cast(k, dt),
                                                     ops::cast(v, dt), options),
                   q.dtype());
}

Tensor autocast_grouped_product(const Tensor& x, const Tensor& counts,
                                const std::vector<Tensor>& weights) {
  if (!is_16bit_float(current) || weights.empty()) return ops::grouped_linear(x, counts, weights);
  // One cast per distinct weight: an expert that runs several blocks (one
  // per sending process, under expert parallelism) then gets its blocks'
  // gradients added in block order, as accumulation adds micro-batches,
  // not in the reverse order several cast nodes would run in.
  std::vector<Tensor> narrow;
  narrow.reserve(weights.size());
  std::unordered_map<const TensorImpl*, Tensor> cast_of;
  for (const Tensor& w : weights) {
    auto [it, fresh] = cast_of.try_emplace(w.impl());
    if (fresh) it->second = autocast_operand(w);
    narrow.push_back(it->second);
  }
  return ops::grouped_linear(autocast_operand(x), counts, narrow);
}

Tensor autocast_grouped_linear(const Tensor& x, const Tensor& counts,
                               const std::vector<Tensor>& weights) {
  if (!is_16bit_float(current) || weights.empty()) return ops::grouped_linear(x, counts, weights);
  return ops::cast(autocast_grouped_product(x, counts, weights), weights[0].dtype());
}

}  // namespace reprise::nn
