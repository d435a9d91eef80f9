#pragma once
// OpInfo describes one op for the tape: its name, whether it draws random
// numbers, and its cost from the shapes it ran on. Each op defines exactly
// one OpInfo beside its forward kernel and backward rule (ops/*.cpp); the
// recompute planner reads the costs.

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
};

double op_flops(const OpInfo& op, const std::vector<Tensor>& inputs,
                const std::vector<Tensor>& outputs);
double op_bytes(const OpInfo& op, const std::vector<Tensor>& inputs,
                const std::vector<Tensor>& outputs);

}  // namespace reprise::autograd
