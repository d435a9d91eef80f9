#pragma once
// OpInfo describes one op for the tape: its name, whether it draws random
// numbers, and its cost from the shapes it ran on. reprise's ops are declared once each in
// ops/registry.cpp and registered by name (autograd/op_registry.h); the recompute planner reads the
// costs.

#include <vector>

namespace reprise {
class Tensor;
}

namespace reprise::autograd {

using CostFn = double (*)(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);

struct OpInfo {
  const char* name;
  bool is_random = false;
  CostFn flops = nullptr;  // floating-point operations; default: one per output element
  CostFn bytes = nullptr;  // bytes read and written; default: every input and output once
  // Its backward takes the f32 sum of several gradients for a bf16 or f16
  // output as it is (autograd/backward.h), instead of that sum rounded to
  // the output's dtype: a cast from a wider float, whose backward converts
  // the gradient to the wider dtype anyway.
  bool takes_wide_gradients = false;
};

double op_flops(const OpInfo& op, const std::vector<Tensor>& inputs,
                const std::vector<Tensor>& outputs);
// The CostFn of an op that does no floating-point work: it moves or
// selects values (a cast, a gather, a concatenation, a collective).
double no_flops(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
double op_bytes(const OpInfo& op, const std::vector<Tensor>& inputs,
                const std::vector<Tensor>& outputs);

}  // namespace reprise::autograd
