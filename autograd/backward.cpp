#include "autograd/backward.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/tracer.h"
#include "engine/accumulate.h"

namespace reprise::autograd {
namespace {

struct Root {
  Edge edge;
  Tensor grad;
};

// A gradient that grad() wants returned instead of propagated.
struct Capture {
  Node* node;
  uint32_t input_nr;
  size_t slot;
};

Tensor seed_gradient(const Tensor& root, const Tensor& grad_root, const char* api) {
  REPRISE_CHECK(root.defined(), api, ": root tensor is undefined");
  REPRISE_CHECK(root.requires_grad(), api, ": ", root.describe(),
                " does not require grad (no input of it requires grad, or it was computed under "
                "NoGradGuard)");
  if (!grad_root.defined()) {
    REPRISE_CHECK(root.numel() == 1, api,
                  ": the gradient can be implied only for a scalar root, got ", root.describe(),
                  "; pass grad_root");
    return Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  REPRISE_CHECK(grad_root.shape() == root.shape() && grad_root.dtype() == root.dtype(), api,
                ": grad_root ", grad_root.describe(), " does not match root ", root.describe());
  // The caller's memory enters the graph uncopied: backward never writes a
  // gradient in place, AccumulateGrad copies a gradient whose storage is
  // shared (the caller still holds this one), and grad() copies a result
  // that would alias a seed. detach() keeps a seed that requires grad from
  // recording anything.
  return grad_root.detach();
}

class Engine {
 public:
  Engine(std::vector<Root> roots, BackwardOptions options)
      : roots_(std::move(roots)), options_(options) {}

  // Restricts execution to nodes from which one of `targets` is reachable,
  // and returns gradients arriving at targets instead of passing them on.
  void capture(const std::vector<Edge>& targets) {
    captures_.resize(targets.size());
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i].valid())
        captures_by_node_[targets[i].node.get()].push_back(
            {targets[i].node.get(), targets[i].input_nr, i});
    }
    capturing_ = true;
  }

  void run() {
    discover();
    std::priority_queue<std::pair<uint64_t, Node*>> ready;
    for (auto& [node, count] : pending_) {
      if (count == 0) ready.push({node->sequence_nr(), node});
    }
    while (!ready.empty()) {
      Node* node = ready.top().second;
      ready.pop();
      Tensors grads = std::move(buffers_[node]);
      buffers_.erase(node);
      if (capturing_) {
        auto it = captures_by_node_.find(node);
        if (it != captures_by_node_.end()) {
          for (const Capture& c : it->second) {
            if (c.input_nr < grads.size())
              captures_[c.slot] = in_output_dtype(*node, c.input_nr, grads[c.input_nr]);
          }
        }
      }
      if (should_execute(node)) execute(*node, grads);
      for (const Edge& e : node->next_edges) {
        if (!e.valid() || !pending_.count(e.node.get())) continue;
        if (--pending_[e.node.get()] == 0) ready.push({e.node->sequence_nr(), e.node.get()});
      }
    }
  }

  Tensors captured() const { return captures_; }

 private:
  // Finds every node reachable from the roots and counts, for each, the
  // edges that will deliver a gradient to it.
  void discover() {
    std::vector<Node*> stack;
    for (const Root& r : roots_) {
      add_gradient(r.edge, r.grad);
      if (seen_.insert(r.edge.node.get()).second) {
        stack.push_back(r.edge.node.get());
        pending_[r.edge.node.get()];
      }
    }
    std::vector<Node*> order;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        ++pending_[e.node.get()];
        if (seen_.insert(e.node.get()).second) stack.push_back(e.node.get());
      }
    }
    if (capturing_) mark_useful(order);
  }

  // A node is useful to grad() when a capture target is reachable from it.
  void mark_useful(const std::vector<Node*>& order) {
    // Process in increasing sequence order: inputs are recorded before consumers.
    std::vector<Node*> sorted = order;
    std::sort(sorted.begin(), sorted.end(),
              [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); });
    for (Node* n : sorted) {
      bool useful = false;
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        useful = useful || useful_.count(e.node.get()) || captures_by_node_.count(e.node.get());
      }
      if (useful) useful_.insert(n);
    }
  }

  bool should_execute(Node* node) const {
    if (!capturing_) return true;
    if (dynamic_cast<AccumulateGrad*>(node)) return false;  // grad() leaves .grad alone
    return useful_.count(node) > 0;
  }

  void execute(Node& node, const Tensors& grads_in) {
    // Materialise zeros for differentiable outputs that received no gradient.
    Tensors grads = grads_in;
    size_t n_out = dynamic_cast<AccumulateGrad*>(&node) ? 1 : node.num_public_outputs;
    grads.resize(n_out);
    for (size_t i = 0; i < n_out; ++i) {
      const TensorMeta* m = i < node.outputs.size() ? &node.outputs[i] : nullptr;
      if (m && !grads[i].defined() && is_floating(m->dtype))
        grads[i] = Tensor::zeros(m->shape, m->dtype, m->device);
      if (!node.op().takes_wide_gradients) grads[i] = in_output_dtype(node, i, grads[i]);
    }
    Tensors input_grads;
    {
      TraceSpan span(node.name(), node.scope(), "backward");
      NoGradGuard no_grad;
      input_grads = node.apply(grads);
    }
    if (detect_anomaly_enabled()) check_backward_grads(node, input_grads);
    if (!options_.retain_graph) node.release();
    for (size_t i = 0; i < input_grads.size(); ++i) {
      if (node.needs_input_grad(i) && input_grads[i].defined())
        add_gradient(node.next_edges[i], input_grads[i]);
    }
  }

  // g, the gradient for output i of `node`, in that output's dtype: a 16-bit
  // output's gradients summed in f32 (add_gradient) round to it once here.
  static Tensor in_output_dtype(const Node& node, size_t i, const Tensor& g) {
    // An AccumulateGrad's one "output" is its leaf, which inputs[0] describes.
    const std::vector<TensorMeta>& metas =
        dynamic_cast<const AccumulateGrad*>(&node) ? node.inputs : node.outputs;
    if (!g.defined() || i >= metas.size() || g.dtype() == metas[i].dtype) return g;
    return g.to(metas[i].dtype);
  }

  // Several gradients for one tensor add up in its dtype, except bf16 and
  // f16 ones, which add up in f32 (exact widening, one f32 rounding per
  // addition) and are rounded to the tensor's dtype once, when its node
  // runs (execute), as PyTorch sums the per-op casts of one f32 tensor.
  void add_gradient(const Edge& e, const Tensor& g) {
    Tensors& slots = buffers_[e.node.get()];
    if (slots.size() <= e.input_nr) slots.resize(e.input_nr + 1);
    Tensor& slot = slots[e.input_nr];
    if (!slot.defined()) {
      slot = g;
    } else if (is_16bit_float(g.dtype())) {
      slot = sum_of(slot.to(DType::f32), g.to(DType::f32));
    } else {
      slot = sum_of(slot, g);
    }
  }

  std::vector<Root> roots_;
  BackwardOptions options_;
  std::unordered_set<Node*> seen_;
  std::unordered_map<Node*, int64_t> pending_;
  std::unordered_map<Node*, Tensors> buffers_;
  bool capturing_ = false;
  std::unordered_map<Node*, std::vector<Capture>> captures_by_node_;
  std::unordered_set<Node*> useful_;
  Tensors captures_;
};

std::vector<Root> make_roots(const Tensors& outputs, const Tensors& grad_outputs, const char* api) {
  REPRISE_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), api, ": ",
                grad_outputs.size(), " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Root> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor g = seed_gradient(outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i], api);
    roots.push_back({gradient_edge(outputs[i]), g});
  }
  return roots;
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_root, BackwardOptions options) {
  Engine engine(make_roots({root}, {grad_root}, "backward"), options);
  engine.run();
}

Tensors grad(const Tensors& outputs, const Tensors& inputs, const Tensors& grad_outputs,
             BackwardOptions options, bool allow_unused) {
  std::vector<Edge> targets;
  for (const Tensor& in : inputs) {
    REPRISE_CHECK(in.defined() && in.requires_grad(), "grad: input ", in.describe(),
                  " does not require grad");
    targets.push_back(gradient_edge(in));
  }
  Engine engine(make_roots(outputs, grad_outputs, "grad"), options);
  engine.capture(targets);
  engine.run();
  Tensors result = engine.captured();
  for (size_t i = 0; i < result.size(); ++i) {
    REPRISE_CHECK(allow_unused || result[i].defined(), "grad: input ", i, " (",
                  inputs[i].describe(), ") is not used by the outputs; pass allow_unused=true");
    // A seed can reach an input unchanged (y = x + c): return a copy, not
    // the caller's own tensor.
    for (const Tensor& seed : grad_outputs) {
      if (result[i].defined() && seed.defined() && result[i].storage() == seed.storage())
        result[i] = result[i].clone();
    }
  }
  return result;
}

}  // namespace reprise::autograd
