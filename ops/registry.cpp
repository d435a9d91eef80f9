#include "ops/registry.h"

#include "autograd/op_registry.h"
#include "engine/elementwise_ops.h"
#include "engine/tensor.h"

namespace reprise::ops::registry {
namespace {

using Tensors = std::vector<Tensor>;

// Costs. The default (no function) is one flop per output element and
// every input and output read or written once (autograd/tape.h).

// Copying, selecting and layout ops do no arithmetic (autograd::no_flops).
// split makes views: nothing is read or written.
double no_bytes(const Tensors&, const Tensors&) { return 0; }
// 2 M N K: every output element is K multiply-adds.
double product_flops(const Tensors& in, const Tensors& out) {
  return 2.0 * double(out[0].numel()) * double(in[0].size(-1));
}
// Both tile products: 2 T S D for Q K^T and 2 T S Dv for P V per (b, h).
// Causal attention skips about half of them; the cost is the dense count.
double sdpa_flops(const Tensors& in, const Tensors&) {
  const Tensor &q = in[0], &v = in[2];
  return 2.0 * double(q.size(0) * q.size(1)) * double(q.size(2)) * double(v.size(2)) *
         double(q.size(3) + v.size(3));
}
// max, subtract, exp and sum per logit.
double cross_entropy_flops(const Tensors& in, const Tensors&) {
  return 4.0 * double(in[0].numel());
}
// About max, subtract, exp, sum and scale per element.
double softmax_flops(const Tensors& in, const Tensors&) { return 5.0 * double(in[0].numel()); }
// Square-and-add, scale, weight.
double rmsnorm_flops(const Tensors& in, const Tensors&) { return 4.0 * double(in[0].numel()); }
// Mean, centred square-and-add, centre, scale, weight, bias.
double layernorm_flops(const Tensors& in, const Tensors&) { return 7.0 * double(in[0].numel()); }
// Two multiplies and an add per element.
double rotary_flops(const Tensors& in, const Tensors&) { return 3.0 * double(in[0].numel()); }
// The sigmoid's exp, its divide and the gating multiply: 4 per element.
double swiglu_flops(const Tensors& in, const Tensors&) { return 4.0 * double(in[0].numel()); }
// Per position and (b, h): decay, m, the correction and out, each K V
// multiply-adds or multiplies: about 7 K V.
double delta_rule_flops(const Tensors& in, const Tensors&) {
  const Tensor &q = in[0], &v = in[2];
  return 7.0 * double(q.size(0) * q.size(1) * q.size(2)) * double(q.size(3) * v.size(3));
}
// About k comparisons per score, plus the gates.
double route_flops(const Tensors& in, const Tensors&) { return 2.0 * double(in[0].numel()); }
// An embedding lookup reads the ids and the gathered rows (not all of the
// weight) and writes the output.
double embedding_bytes(const Tensors& in, const Tensors& out) {
  return double(in[1].nbytes()) + 2.0 * double(out[0].nbytes());
}
// index_select and gather read only the selected elements of x (one per
// output element), not all of it: index + selected + output.
double selected_bytes(const Tensors& in, const Tensors& out) {
  return double(in[1].nbytes() + 2 * out[0].nbytes());
}
// One add per source element (input 2 is src).
double source_adds(const Tensors& in, const Tensors&) { return double(in[2].numel()); }
// Roughly one comparison per input element (selection, then a sort of k;
// a full sort's log N factor is left out, its dim being unknown here).
double input_compares(const Tensors& in, const Tensors&) { return double(in[0].numel()); }

}  // namespace

namespace {
// One per row of engine/elementwise_ops.h, in its order.
#define REPRISE_OP_INFO(op, ...) OpInfo{.name = #op},
const OpInfo kUnaryOps[] = {REPRISE_UNARY_OPS(REPRISE_OP_INFO) REPRISE_SCALAR_OPS(REPRISE_OP_INFO)};
const OpInfo kBinaryOps[] = {REPRISE_BINARY_OPS(REPRISE_OP_INFO)};
#undef REPRISE_OP_INFO
}  // namespace

const OpInfo& of(UnaryOp op) { return kUnaryOps[size_t(op)]; }
const OpInfo& of(BinaryOp op) { return kBinaryOps[size_t(op)]; }

const OpInfo kSwiglu{.name = "swiglu", .flops = swiglu_flops};
const OpInfo kSum{.name = "sum"};
const OpInfo kMean{.name = "mean"};
const OpInfo kMax{.name = "max"};
const OpInfo kCumsum{.name = "cumsum"};
const OpInfo kSoftmax{.name = "softmax", .flops = softmax_flops};
const OpInfo kLogSoftmax{.name = "log_softmax", .flops = softmax_flops};
const OpInfo kCrossEntropy{.name = "cross_entropy", .flops = cross_entropy_flops};
const OpInfo kRmsnorm{.name = "rmsnorm", .flops = rmsnorm_flops};
const OpInfo kLayernorm{.name = "layernorm", .flops = layernorm_flops};
const OpInfo kRotary{.name = "rotary", .flops = rotary_flops};
const OpInfo kEmbedding{.name = "embedding", .flops = autograd::no_flops, .bytes = embedding_bytes};
const OpInfo kIndexSelect{
    .name = "index_select", .flops = autograd::no_flops, .bytes = selected_bytes};
const OpInfo kGather{.name = "gather", .flops = autograd::no_flops, .bytes = selected_bytes};
const OpInfo kScatterAdd{.name = "scatter_add", .flops = source_adds};
const OpInfo kIndexAdd{.name = "index_add", .flops = source_adds};
const OpInfo kWhere{.name = "where", .flops = autograd::no_flops};
const OpInfo kClamp{.name = "clamp"};
const OpInfo kTopk{.name = "topk", .flops = input_compares};
const OpInfo kSort{.name = "sort", .flops = input_compares};
const OpInfo kMatmul{.name = "matmul", .flops = product_flops};
const OpInfo kLinear{.name = "linear", .flops = product_flops};
const OpInfo kGroupedLinear{.name = "grouped_linear", .flops = product_flops};
const OpInfo kSdpa{.name = "sdpa", .flops = sdpa_flops};
const OpInfo kSdpaDropout{.name = "sdpa_dropout", .is_random = true, .flops = sdpa_flops};
const OpInfo kDeltaRule{.name = "gated_delta_rule", .flops = delta_rule_flops};
const OpInfo kMoeRoute{.name = "moe_route", .flops = route_flops};
const OpInfo kDropout{.name = "dropout", .is_random = true};
const OpInfo kCast{.name = "cast", .flops = autograd::no_flops, .takes_wide_gradients = true};
const OpInfo kReshape{.name = "reshape"};
const OpInfo kTranspose{.name = "transpose"};
const OpInfo kPermute{.name = "permute"};
const OpInfo kSlice{.name = "slice"};
const OpInfo kExpand{.name = "expand"};
const OpInfo kSqueeze{.name = "squeeze"};
const OpInfo kUnsqueeze{.name = "unsqueeze"};
const OpInfo kContiguous{.name = "contiguous"};
const OpInfo kCat{.name = "cat", .flops = autograd::no_flops};
const OpInfo kSplit{.name = "split", .flops = autograd::no_flops, .bytes = no_bytes};
const OpInfo kStack{.name = "stack", .flops = autograd::no_flops};

const std::vector<const OpInfo*>& all() {
  static const std::vector<const OpInfo*> ops = [] {
    std::vector<const OpInfo*> v;
    for (const OpInfo& op : kUnaryOps) v.push_back(&op);
    for (const OpInfo& op : kBinaryOps) v.push_back(&op);
    for (const OpInfo* op :
         {&kSwiglu,      &kSum,          &kMean,       &kMax,       &kCumsum,        &kSoftmax,
          &kLogSoftmax,  &kCrossEntropy, &kRmsnorm,    &kLayernorm, &kRotary,        &kEmbedding,
          &kIndexSelect, &kGather,       &kScatterAdd, &kIndexAdd,  &kWhere,         &kClamp,
          &kTopk,        &kSort,         &kMatmul,     &kLinear,    &kGroupedLinear, &kSdpa,
          &kSdpaDropout, &kDeltaRule,    &kMoeRoute,   &kDropout,   &kCast,          &kReshape,
          &kTranspose,   &kPermute,      &kSlice,      &kExpand,    &kSqueeze,       &kUnsqueeze,
          &kContiguous,  &kCat,          &kSplit,      &kStack})
      v.push_back(op);
    return v;
  }();
  return ops;
}

namespace {
// Every op file records with one of the OpInfos above, which links this
// file in, and with it this registration.
const bool registered = [] {
  for (const OpInfo* op : all()) autograd::register_op(*op);
  return true;
}();
}  // namespace

}  // namespace reprise::ops::registry
