#pragma once
// Elementwise unary ops on f32/f64 tensors of any shape: y has x's shape.

#include "engine/tensor.h"

namespace reprise::ops {

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);

}  // namespace reprise::ops
