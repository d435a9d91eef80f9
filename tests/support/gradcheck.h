#pragma once
// Gradient checking in f64 by central differences, and the table of op
// cases that drives it (tests/ops/gradcheck_test.cpp). Each op family adds
// its cases from its own test file with a static RegisterOpCases.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::testing {

using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Inputs&)>;

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-7;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
};

// Checks d<fn(inputs), w>/d(input) for every input that requires grad,
// where w is a fixed pseudo-random weighting of the output: the analytic
// gradient (autograd::grad) against central differences.
::testing::AssertionResult gradcheck(const OpFn& fn, const Inputs& inputs,
                                     GradcheckOptions options = {});

struct OpCase {
  std::string name;                // "silu/3x5x7": the registered op, then what is special
  std::function<Inputs()> inputs;  // f64; differentiable ones require grad
  OpFn fn;
  GradcheckOptions options = {};
};

std::vector<OpCase>& op_cases();

// The registered op a case exercises: its name up to the first '/'.
std::string op_of(const OpCase& c);

struct RegisterOpCases {
  explicit RegisterOpCases(std::vector<OpCase> cases);
};

// Deterministic test data (a fixed LCG, independent of the rng layer).
Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed, DType dtype = DType::f64);
// A leaf that requires grad.
Tensor param(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);

// Max |a - b| over all elements (same shape), as doubles.
double max_abs_diff(const Tensor& a, const Tensor& b);

// Bitwise equal element for element, whatever the strides and devices, with
// one shape and dtype (NaNs of any payload count as equal; two undefined
// tensors are equal). The failure names the first element that differs.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b);

}  // namespace reprise::testing
