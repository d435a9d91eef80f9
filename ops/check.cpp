#include "ops/check.h"

#include "engine/backend.h"

namespace reprise::ops::detail {

void check_same_dtype_device(const char* op, const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.defined() && b.defined(), op, ": undefined input");
  REPRISE_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch: ", a.describe(), " vs ",
                b.describe(), " (expected one dtype)");
  REPRISE_CHECK(a.device() == b.device(), op, ": device mismatch: ", a.describe(), " vs ",
                b.describe(), " (expected one device)");
}

void check_float(const char* op, const Tensor& t) {
  REPRISE_CHECK(t.defined(), op, ": undefined input");
  REPRISE_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op,
                ": expected a tensor of dtype f32 or f64, got ", t.describe());
}

void check_float_or_bf16(const char* op, const Tensor& t) {
  REPRISE_CHECK(t.defined(), op, ": undefined input");
  REPRISE_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::bf16, op,
                ": expected a tensor of dtype f32, f64 or bf16, got ", t.describe());
}

void check_any_float(const char* op, const Tensor& t) {
  REPRISE_CHECK(t.defined(), op, ": undefined input");
  REPRISE_CHECK(is_floating(t.dtype()), op,
                ": expected a tensor of dtype f32, f64, bf16 or f16, got ", t.describe());
}

void check_index_tensor(const char* op, const char* what, const Tensor& t, const Tensor& data) {
  REPRISE_CHECK(t.defined(), op, ": undefined ", what);
  REPRISE_CHECK((t.dtype() == DType::i32 || t.dtype() == DType::i64) && t.device() == data.device(),
                op, ": expected ", what, " of dtype i32 or i64 on ", to_string(data.device()),
                ", got ", t.describe(), " (for ", data.describe(), ")");
}

std::optional<std::pair<int64_t, int64_t>> first_out_of_range(const Tensor& index, int64_t size) {
  if (index.numel() == 0) return std::nullopt;
  const IndexRange r = backend_of(index).index_range(index);
  if (r.min >= 0 && r.max < size) return std::nullopt;
  const std::vector<int64_t> values = index.to_vector<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= size) return std::make_pair(values[i], int64_t(i));
  }
  return std::nullopt;
}

}  // namespace reprise::ops::detail
