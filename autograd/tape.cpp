#include "autograd/tape.h"

#include <algorithm>
#include <optional>

#include "autograd/anomaly.h"
#include "autograd/scope.h"
#include "autograd/tracer.h"
#include "engine/current_op.h"

namespace reprise::autograd {
namespace {
std::vector<TapeObserver*>& observers() {
  thread_local std::vector<TapeObserver*> list;
  return list;
}
}  // namespace

ObserveTape::ObserveTape(TapeObserver& observer) : observer_(&observer) {
  observers().push_back(observer_);
}

ObserveTape::~ObserveTape() {
  auto& list = observers();
  list.erase(std::find(list.begin(), list.end(), observer_));
}

double op_flops(const OpInfo& op, const Tensors& inputs, const Tensors& outputs) {
  if (op.flops) return op.flops(inputs, outputs);
  double n = 0;
  for (const Tensor& t : outputs) n += double(t.numel());
  return n;
}

double no_flops(const Tensors&, const Tensors&) { return 0; }

double op_bytes(const OpInfo& op, const Tensors& inputs, const Tensors& outputs) {
  if (op.bytes) return op.bytes(inputs, outputs);
  double n = 0;
  for (const Tensor& t : inputs) n += t.defined() ? double(t.nbytes()) : 0.0;
  for (const Tensor& t : outputs) n += double(t.nbytes());
  return n;
}

Tensors record(OpCall call) {
  // Spans the forward and the recording, so that the memory sample after it
  // counts what the node saved (and what a checkpoint region dropped).
  std::optional<TraceSpan> span;
  if (active_tracer()) [[unlikely]]
    span.emplace(call.op.name, *current_scope());
  bool needs_grad = false;
  if (GradMode::enabled()) {
    for (const Tensor& t : call.inputs)
      needs_grad = needs_grad || (t.defined() && t.requires_grad());
  }

  Tensors outputs;
  {
    NoGradGuard no_grad;
    const CurrentOpGuard running(call.op.name, "forward", *current_scope());
    outputs = call.forward(call.inputs, call.rng ? &*call.rng : nullptr);
  }
  // A forward may hand back an input unchanged (a no-op view): give the
  // output its own TensorImpl so that its autograd fields are its own.
  for (Tensor& out : outputs) {
    for (const Tensor& in : call.inputs) {
      if (out.is_same(in)) out = in.detach();
    }
  }
  size_t num_public =
      call.num_public_outputs < 0 ? outputs.size() : size_t(call.num_public_outputs);
  REPRISE_CHECK(num_public <= outputs.size(), call.op.name, ": forward returned ", outputs.size(),
                " outputs, fewer than the ", num_public, " public ones");

  if (needs_grad) {
    auto node = std::make_shared<Node>(call.op, next_sequence_nr());
    node->num_public_outputs = uint32_t(num_public);
    for (const Tensor& t : call.inputs) {
      node->next_edges.push_back(gradient_edge(t));
      node->inputs.push_back(t.defined() ? TensorMeta::of(t) : TensorMeta{});
    }
    for (const Tensor& t : outputs) node->outputs.push_back(TensorMeta::of(t));
    for (uint32_t i : call.save.inputs) {
      node->saved_slots.push_back({SavedSlot::Source::input, i});
      node->saved.emplace_back(call.inputs.at(i));
    }
    for (uint32_t i : call.save.outputs) {
      node->saved_slots.push_back({SavedSlot::Source::output, i});
      node->saved.emplace_back(outputs.at(i));
    }
    node->rng = call.rng;
    node->flops = op_flops(call.op, call.inputs, outputs);
    node->bytes = op_bytes(call.op, call.inputs, outputs);
    node->forward = std::move(call.forward);
    node->backward = std::move(call.backward);
    if (detect_anomaly_enabled()) check_forward_outputs(*node, outputs);
    for (size_t i = 0; i < num_public; ++i) {
      if (!is_floating(outputs[i].dtype())) continue;  // indices, masks: no gradient
      TensorImpl* impl = outputs[i].impl();
      impl->grad_fn = node;
      impl->output_nr = uint32_t(i);
    }
    auto& list = observers();
    for (auto it = list.rbegin(); it != list.rend(); ++it)
      (*it)->on_record(node, call.inputs, outputs);
  }
  outputs.resize(num_public);
  return outputs;
}

Tensor record_one(OpCall call) {
  Tensors out = record(std::move(call));
  REPRISE_CHECK(out.size() == 1, "record_one: op returned ", out.size(), " outputs");
  return out[0];
}

}  // namespace reprise::autograd
