#pragma once
// Elementwise binary ops with numpy broadcasting: out has
// broadcast_shapes(a.shape, b.shape). Both inputs share dtype and device.

#include "engine/tensor.h"

namespace reprise::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // integers: true division, in f32
// The larger (smaller) of a and b, NaN where either is. As torch's, the
// gradient goes to the larger (smaller) operand, and half to each where
// they are equal.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// With a scalar: x + s, x * s. An i32/i64 x keeps its dtype when s is
// integral and becomes f32 otherwise, as in torch.
Tensor add(const Tensor& x, double s);
Tensor mul(const Tensor& x, double s);

}  // namespace reprise::ops
