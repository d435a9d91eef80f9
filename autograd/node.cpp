#include "autograd/node.h"

#include <atomic>

#include "autograd/scope.h"
#include "engine/accumulate.h"
#include "engine/current_op.h"

namespace reprise::autograd {

std::string TensorMeta::describe() const {
  return std::string(dtype_name(dtype)) + to_string(shape) + " " + to_string(device);
}

// ---- SavedTensor -----------------------------------------------------------

namespace {

// Whether node's value is made from parameters (leaves that require grad)
// alone within `depth` recorded ops: a weight or a copy of one (its bf16
// cast under autocast, a transpose), never an activation. An input that is
// not a parameter (data, such as a layer's input or token ids) makes it an
// activation.
bool made_from_parameters(const Node& node, int depth) {
  if (depth == 0) return false;
  for (const Edge& e : node.next_edges) {
    if (!e.valid()) return false;
    if (dynamic_cast<const AccumulateGrad*>(e.node.get()) != nullptr) continue;
    if (!made_from_parameters(*e.node, depth - 1)) return false;
  }
  return true;
}

// A parameter, or a copy of one; see SavedTensor.
bool is_weight(const Tensor& value) {
  constexpr int kCopyDepth = 3;  // e.g. cast(transpose(reshape(w)))
  if (!value.requires_grad()) return false;
  return value.grad_fn() == nullptr || made_from_parameters(*value.grad_fn(), kCopyDepth);
}

}  // namespace

SavedTensor::SavedTensor(const Tensor& value)
    : value_(value.detach()), version_(value.version()), activation_(!is_weight(value)) {
  Storage& storage = *value_.storage();
  if (activation_) {
    storage.retain_saved();
  } else if (storage.kind() == MemoryKind::temporary) {
    storage.set_kind(MemoryKind::parameter);
  }
}

SavedTensor::~SavedTensor() { release(); }

SavedTensor::SavedTensor(SavedTensor&& other) noexcept
    : value_(std::move(other.value_)),
      version_(other.version_),
      activation_(other.activation_),
      recompute_(std::move(other.recompute_)),
      replayed_(std::move(other.replayed_)) {
  other.value_ = Tensor();
}

SavedTensor& SavedTensor::operator=(SavedTensor&& other) noexcept {
  if (this != &other) {
    release();
    value_ = std::move(other.value_);
    version_ = other.version_;
    activation_ = other.activation_;
    recompute_ = std::move(other.recompute_);
    replayed_ = std::move(other.replayed_);
    other.value_ = Tensor();
  }
  return *this;
}

Tensor SavedTensor::unpack(const std::string& where) const {
  if (!value_.defined()) {
    REPRISE_CHECK(recompute_ != nullptr, where,
                  ": a tensor saved for backward was already freed; call backward with "
                  "retain_graph=true to backward through the graph again");
    if (!replayed_.defined()) replayed_ = recompute_();
    return replayed_;
  }
  REPRISE_CHECK(value_.version() == version_, where, ": a tensor ", value_.describe(),
                " saved for backward was modified in place after it was saved (version ", version_,
                ", now ", value_.version(), ")");
  return value_;
}

void SavedTensor::drop(std::function<Tensor()> recompute) {
  release();
  recompute_ = std::move(recompute);
}

void SavedTensor::release() {
  if (value_.defined()) {
    if (activation_) value_.storage()->release_saved();
    value_ = Tensor();
  }
}

// ---- Node ------------------------------------------------------------------

Node::Node(const OpInfo& op, uint64_t sequence_nr)
    : op_(&op), sequence_nr_(sequence_nr), scope_(current_scope()) {}

std::string Node::where() const {
  return scope_->empty() ? std::string(name()) : std::string(name()) + " at " + *scope_;
}

bool Node::needs_input_grad(size_t index) const {
  return index < next_edges.size() && next_edges[index].valid();
}

Tensor Node::saved_slot(SavedSlot::Source source, uint32_t index) const {
  for (size_t k = 0; k < saved_slots.size(); ++k) {
    if (saved_slots[k].source == source && saved_slots[k].index == index) {
      return saved[k].unpack(where());
    }
  }
  REPRISE_FAIL(where(), ": backward reads ",
               source == SavedSlot::Source::input ? "input " : "output ", index,
               ", which the op did not save");
}

Tensor Node::saved_input(uint32_t index) const {
  return saved_slot(SavedSlot::Source::input, index);
}
Tensor Node::saved_output(uint32_t index) const {
  return saved_slot(SavedSlot::Source::output, index);
}

Tensors Node::apply(const Tensors& grad_outputs) {
  REPRISE_CHECK(!released_, where(),
                ": backward through this node a second time, but its saved tensors were freed "
                "by the first backward; pass retain_graph=true to the first one");
  REPRISE_CHECK(backward != nullptr, where(), ": op has no backward rule");
  const CurrentOpGuard running(name(), "backward", *scope_);
  Tensors grads = backward(*this, grad_outputs);
  for (SavedTensor& s : saved) s.forget_replayed();  // replayed values die with their reader
  REPRISE_CHECK(grads.size() == inputs.size(), where(), ": backward rule returned ", grads.size(),
                " gradients for ", inputs.size(), " inputs");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !needs_input_grad(i)) continue;
    REPRISE_CHECK(grads[i].shape() == inputs[i].shape && grads[i].dtype() == inputs[i].dtype,
                  where(), ": backward rule returned gradient ", grads[i].describe(), " for input ",
                  i, " of ", inputs[i].describe());
  }
  return grads;
}

void Node::release() {
  saved.clear();
  saved_slots.clear();
  forward = nullptr;
  backward = nullptr;
  released_ = true;
}

// ---- AccumulateGrad --------------------------------------------------------

namespace {
const OpInfo kAccumulateGrad{"accumulate_grad"};
}

namespace {
thread_local GradReadyHook* t_grad_ready_hook = nullptr;
}  // namespace

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
    : Node(kAccumulateGrad, next_sequence_nr()), leaf_(std::move(leaf)) {
  inputs.push_back(TensorMeta::of(Tensor(leaf_)));
}

Tensors AccumulateGrad::apply(const Tensors& grad_outputs) {
  const Tensor& g = grad_outputs.at(0);
  if (!g.defined()) return {};
  const CurrentOpGuard running(name(), "backward", scope());
  Tensor leaf(leaf_);
  Tensor current = leaf.grad();
  // Gradients are never written in place during backward: the incoming
  // tensor may still be read by other nodes. The first one is taken as it
  // is when no other tensor shares its memory, else copied.
  Tensor next;
  if (current.defined()) {
    next = sum_of(current, g);
  } else {
    bool exclusive =
        g.is_contiguous() && g.storage().use_count() == 1 && g.nbytes() == g.storage()->nbytes();
    next = exclusive ? g.detach() : g.clone();
  }
  next.storage()->set_kind(MemoryKind::gradient);
  leaf.set_grad(next);
  for (GradReadyHook* h = t_grad_ready_hook; h != nullptr; h = h->previous_) h->hook_(leaf);
  return {};
}

GradReadyHook::GradReadyHook(Fn hook) : hook_(std::move(hook)), previous_(t_grad_ready_hook) {
  t_grad_ready_hook = this;
}

GradReadyHook::~GradReadyHook() { t_grad_ready_hook = previous_; }

// ---- helpers -----------------------------------------------------------------

uint64_t next_sequence_nr() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  TensorImpl* impl = t.impl();
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return {acc, 0};
}

}  // namespace reprise::autograd
