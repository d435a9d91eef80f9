#pragma once
// Gradient checking in f64 by central differences, which the op case table
// (tests/cases/op_case.h) drives in tests/ops/gradcheck_test.cpp, and the
// comparisons of results that tests share.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {

// Checks d<fn(inputs), w>/d(input) for every input that requires grad,
// where w is a fixed pseudo-random weighting of each floating output: the
// analytic gradient (autograd::grad) against central differences.
::testing::AssertionResult gradcheck(const OpFn& fn, const Inputs& inputs,
                                     GradcheckOptions options = {});

// The weighting of each floating output that gradcheck and the backend
// comparisons use: uniform on [-1, 1), fixed by the output's position and
// shape, on its device (undefined for integer outputs).
std::vector<Tensor> output_weights(const Outputs& outputs);
// sum_k sum(outputs_k * weights_k) over the outputs that require grad: the
// recorded scalar whose gradient is compared; undefined when none does.
Tensor weighted_loss(const Outputs& outputs, const std::vector<Tensor>& weights);

// Max |a - b| over all elements (same shape), as doubles.
double max_abs_diff(const Tensor& a, const Tensor& b);

// Bitwise equal element for element, whatever the strides and devices, with
// one shape and dtype (NaNs of any payload count as equal; two undefined
// tensors are equal). The failure names the first element that differs.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b);

}  // namespace reprise::testing
