#pragma once
// A Node is one recorded op on the tape: what ran (OpInfo), on what
// (input edges and output metadata), what it keeps for backward (saved
// tensors), where (scope path) and with which random numbers (RNG
// reservation). Its backward rule maps output gradients to input gradients.
//
// Ownership follows the data: a tensor owns its producer node, a node owns
// the nodes of its inputs through its edges, so a graph lives exactly as
// long as something can still backpropagate through it. Sequence numbers
// give the recording order, and backward runs nodes in reverse of it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/op_info.h"
#include "engine/tensor.h"
#include "rng/reservation.h"

namespace reprise::autograd {

class Node;
using Tensors = std::vector<Tensor>;

// Where an input's gradient goes: input `input_nr` of `node`.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Shape, dtype and device of a tensor a node consumed or produced.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  static TensorMeta of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }
  std::string describe() const;
};

// Which tensor of a node a saved slot holds.
struct SavedSlot {
  enum class Source : uint8_t { input, output };
  Source source;
  uint32_t index;
};

// A tensor kept for backward. It holds the data without its autograd
// history (no reference cycle through its own producer) and remembers the
// storage version at save time so that reading it after an in-place write
// is an error. A saved tensor can also be dropped and rebuilt on demand by
// a recompute function (activation checkpointing).
//
// What it holds counts as what the user made it: a leaf that requires
// grad, the user's parameter, as parameter, and so does a copy of one that
// a few recorded ops made from parameters alone (the bf16 weight autocast
// casts); anything else (a value an op made from an
// activation, an op's integer output, data the step reads) as
// saved_activation while held.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& value);
  ~SavedTensor();
  SavedTensor(SavedTensor&& other) noexcept;
  SavedTensor& operator=(SavedTensor&& other) noexcept;
  SavedTensor(const SavedTensor&) = delete;
  SavedTensor& operator=(const SavedTensor&) = delete;

  // The value; checks the version, or runs the recompute function (whose
  // result is kept until forget_replayed()). `where` names the reader in
  // error messages.
  Tensor unpack(const std::string& where) const;
  void forget_replayed() { replayed_ = Tensor(); }
  bool holds_value() const { return value_.defined(); }
  const Tensor& value() const { return value_; }

  // Frees the value; unpack() will call `recompute` to rebuild it.
  void drop(std::function<Tensor()> recompute);
  void release();

 private:
  Tensor value_;
  uint64_t version_ = 0;
  bool activation_ = false;  // counted as saved_activation while held
  std::function<Tensor()> recompute_;
  mutable Tensor replayed_;
};

class Node {
 public:
  // Forward as a pure function of the inputs: used to record the op and to
  // replay it during recompute. `rng` is the op's reservation when random.
  using ForwardFn = std::function<Tensors(const Tensors& inputs, const rng::Reservation* rng)>;
  // Backward rule: one gradient per input (undefined where none is needed).
  // grad_outputs has one defined tensor per differentiable output.
  using BackwardFn = std::function<Tensors(Node& node, const Tensors& grad_outputs)>;

  Node(const OpInfo& op, uint64_t sequence_nr);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const OpInfo& op() const { return *op_; }
  const char* name() const { return op_->name; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::string& scope() const { return *scope_; }
  const std::shared_ptr<const std::string>& scope_path() const { return scope_; }
  // "matmul at layers.3.attn" for messages.
  std::string where() const;

  // Runs the backward rule (checks arity, shapes and that the graph is still alive).
  virtual Tensors apply(const Tensors& grad_outputs);
  // Frees saved tensors and rules; a later apply() raises.
  virtual void release();
  bool released() const { return released_; }

  // Inside a backward rule: the saved input/output `index`.
  Tensor saved_input(uint32_t index) const;
  Tensor saved_output(uint32_t index) const;
  bool needs_input_grad(size_t index) const;

  // Recorded state, public for the backward engine and the recompute transform.
  std::vector<Edge> next_edges;     // one per input
  std::vector<TensorMeta> inputs;   // one per input
  std::vector<TensorMeta> outputs;  // one per output, auxiliary outputs last
  uint32_t num_public_outputs = 0;  // outputs returned to the caller
  std::vector<SavedSlot> saved_slots;
  std::vector<SavedTensor> saved;  // parallel to saved_slots
  std::optional<rng::Reservation> rng;
  ForwardFn forward;
  BackwardFn backward;
  double flops = 0;
  double bytes = 0;

  void set_scope(std::shared_ptr<const std::string> scope) { scope_ = std::move(scope); }

 private:
  Tensor saved_slot(SavedSlot::Source source, uint32_t index) const;

  const OpInfo* op_;
  uint64_t sequence_nr_;
  std::shared_ptr<const std::string> scope_;
  bool released_ = false;
};

// The sink of a leaf tensor's gradient: adds incoming gradients to
// leaf.grad(), which it stores as MemoryKind::gradient.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  Tensors apply(const Tensors& grad_outputs) override;
  void release() override {}
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// Tells `hook` about every leaf gradient AccumulateGrad stores on this
// thread while the guard lives, with the leaf and its new .grad(). Guards
// nest: every live one is told, the innermost first. Data-parallel
// training starts reducing a gradient as soon as backward has finished it
// (parallel/gradient_buckets.h), and gives back a layer's gathered
// parameters once all their gradients are in (nn/parameter_shards.h).
class GradReadyHook {
 public:
  using Fn = std::function<void(const Tensor& leaf)>;
  explicit GradReadyHook(Fn hook);
  ~GradReadyHook();
  GradReadyHook(const GradReadyHook&) = delete;
  GradReadyHook& operator=(const GradReadyHook&) = delete;

 private:
  friend class AccumulateGrad;
  Fn hook_;
  GradReadyHook* previous_;
};

// A fresh, monotonically increasing sequence number (recording order).
uint64_t next_sequence_nr();

// The edge that a gradient for `t` flows into: its producer node, its
// leaf accumulator, or an invalid edge when t does not require grad.
Edge gradient_edge(const Tensor& t);

}  // namespace reprise::autograd
