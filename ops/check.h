#pragma once
// Input checks shared by the ops: each raises an Error naming the op and
// the tensors involved.

#include <cstdint>
#include <optional>
#include <utility>

#include "engine/tensor.h"

namespace reprise::ops::detail {

// Raises unless the tensors are defined and share dtype and device.
void check_same_dtype_device(const char* op, const Tensor& a, const Tensor& b);
// Raises unless t is a defined floating tensor (f32 or f64).
void check_float(const char* op, const Tensor& t);
// Raises unless t is a defined f32, f64 or bf16 tensor: the ops that keep
// bf16 activations (computing in f32 and rounding each result once).
void check_float_or_bf16(const char* op, const Tensor& t);
// Raises unless t is a defined floating tensor of any width (f32, f64,
// bf16, f16): the operands of the matrix products.
void check_any_float(const char* op, const Tensor& t);
// Raises unless t is a defined integer tensor (i32 or i64) on the device of
// `data`, the tensor it indexes; `what` names it ("index", "ids", ...).
void check_index_tensor(const char* op, const char* what, const Tensor& t, const Tensor& data);

// The first value of `index` outside [0, size) and its flat position, or
// nothing. The range is computed where the index lives; the index comes to
// the host only when some value is out of range.
std::optional<std::pair<int64_t, int64_t>> first_out_of_range(const Tensor& index, int64_t size);

}  // namespace reprise::ops::detail
