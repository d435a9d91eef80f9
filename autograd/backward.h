#pragma once
// Backpropagation over the recorded graph: nodes run in reverse recording
// order once every gradient they wait for has arrived; gradients reaching a
// node from several consumers are summed in a fixed order, so results are
// deterministic. The gradients of a bf16 or f16 tensor are summed in f32
// and rounded to its dtype once, when its node runs; a cast from a wider
// float (OpInfo::takes_wide_gradients) gets the f32 sum itself, so a 16-bit
// copy shared by several consumers sums their gradients as precisely as
// separate casts of the wider tensor would. Unless retain_graph is set,
// each node frees its saved tensors as soon as it has run.

#include "autograd/node.h"

namespace reprise::autograd {

struct BackwardOptions {
  bool retain_graph = false;
};

// Accumulates d(root)/d(leaf) into leaf.grad() for every leaf that requires
// grad. root must be a scalar unless `grad_root` (same shape) is given.
void backward(const Tensor& root, const Tensor& grad_root = {}, BackwardOptions options = {});

// Returns d(sum_i <outputs[i], grad_outputs[i]>)/d(inputs[j]) for each input,
// without touching any .grad(). An input the outputs do not depend on gets
// an undefined tensor when allow_unused, else raises.
Tensors grad(const Tensors& outputs, const Tensors& inputs, const Tensors& grad_outputs = {},
             BackwardOptions options = {}, bool allow_unused = false);

}  // namespace reprise::autograd
