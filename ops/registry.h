#pragma once
// Every op reprise records, declared once: its name, whether it draws
// random numbers, whether it has a gradient, and its cost (floating-point
// operations and bytes moved) from the shapes it ran on. The op files
// (ops/*.cpp) record with these; they are registered by name with autograd
// (autograd/op_registry.h), so policies and the planner can only name ops
// that exist; and the op tests check that every one has a test case.

#include <vector>

#include "autograd/op_info.h"
#include "engine/elementwise_ops.h"

namespace reprise::ops::registry {

using autograd::OpInfo;

// Elementwise (ops/unary.h, ops/binary.h): one per row of
// engine/elementwise_ops.h.
const OpInfo& of(UnaryOp op);
const OpInfo& of(BinaryOp op);
// Fused (ops/swiglu.h).
extern const OpInfo kSwiglu;
// Reductions and running sums (ops/reduce.h).
extern const OpInfo kSum, kMean, kMax, kCumsum;
// Layers (ops/softmax.h, ops/loss.h, ops/norm.h, ops/rotary.h, ops/embedding.h).
extern const OpInfo kSoftmax, kLogSoftmax, kCrossEntropy, kRmsnorm, kLayernorm, kRotary, kEmbedding;
// Indexing (ops/indexing.h), clamp (ops/clamp.h).
extern const OpInfo kIndexSelect, kGather, kScatterAdd, kIndexAdd, kWhere, kTopk, kSort, kClamp;
// Products (ops/matmul.h, ops/grouped_linear.h, ops/attention.h), and the
// gated delta rule (ops/delta_rule.h).
extern const OpInfo kMatmul, kLinear, kGroupedLinear, kSdpa, kSdpaDropout, kDeltaRule;
// Mixture of experts, random, casts (ops/moe_route.h, ops/random.h, ops/cast.h).
extern const OpInfo kMoeRoute, kDropout, kCast;
// Layout (ops/views.h, ops/shape.h).
extern const OpInfo kReshape, kTranspose, kPermute, kSlice, kExpand, kSqueeze, kUnsqueeze,
    kContiguous, kCat, kSplit, kStack;

// All of the above, in this order (the elementwise ops in their table's).
const std::vector<const OpInfo*>& all();

}  // namespace reprise::ops::registry
