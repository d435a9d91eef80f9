#pragma once
// Elementwise unary ops on f32/f64 tensors of any shape: y has x's shape.
// One function per row of engine/elementwise_ops.h's REPRISE_UNARY_OPS
// (neg, exp, log, sqrt, rsqrt, relu, gelu, silu, sigmoid, tanh, ...), and
// pow with its exponent.

#include "engine/elementwise_ops.h"
#include "engine/tensor.h"

namespace reprise::ops {

#define REPRISE_DECLARE_UNARY(name, ...) Tensor name(const Tensor& x);
REPRISE_UNARY_OPS(REPRISE_DECLARE_UNARY)
#undef REPRISE_DECLARE_UNARY

Tensor pow(const Tensor& x, double exponent);

// The function of x alone that `op` names (a row of REPRISE_UNARY_OPS), for
// code that walks the table; an op that takes a scalar is an Error.
Tensor unary(UnaryOp op, const Tensor& x);

}  // namespace reprise::ops
