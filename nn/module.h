#pragma once
// The Module tree: modules own named parameters and named child modules, and
// a module's name is one path component. The dotted path from the root to a
// parameter is its name (Hugging Face's state-dict names, e.g.
// "model.layers.3.self_attn.q_proj.weight"), and because every module's
// forward runs under autograd::Scope(name()), the same path is the scope of
// the nodes it records ("model.layers.3.self_attn.q_proj"): recompute
// policies, the verifier and error messages name modules the way parameter
// files do.
//
// Parameters are f32 leaves that require grad, stored as
// MemoryKind::parameter. Buffers are f32 tensors of model state that no
// optimizer updates and no gradient reaches (DeepSeek-V3's router bias),
// named and stored like parameters and saved and loaded with them.
// Modules are neither copyable nor movable: children are registered by
// address.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace reprise::nn {

// A parameter under its full dotted name.
struct NamedParameter {
  std::string name;  // e.g. "model.layers.0.self_attn.q_proj.weight"
  Tensor value;      // the leaf itself (not a copy)
  // Whether AdamW applies weight decay by default: false for norm weights
  // and embedding tables (see AdamWOptions::decay_all).
  bool decay = true;
};

// A buffer under its full dotted name.
struct NamedBuffer {
  std::string name;  // e.g. "model.layers.3.mlp.gate.e_score_correction_bias"
  Tensor value;      // the tensor itself
};

class Module {
 public:
  // name: this module's path component ("q_proj", "3", ...); empty for a root
  // that adds nothing to its children's names.
  explicit Module(std::string name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  // Every parameter of this module and its descendants, depth-first in
  // registration order (own parameters before children's), named by their
  // path relative to this module (this module's own name included when not
  // empty).
  std::vector<NamedParameter> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // The parameter with this full name; raises an Error naming it, and the
  // closest existing names, when absent.
  Tensor parameter(std::string_view full_name) const;
  int64_t num_parameters() const;  // elements, summed over parameters()
  // Every buffer, in the order parameters() lists parameters.
  std::vector<NamedBuffer> buffers() const;
  // The parameters, then the buffers: what a model's files hold.
  std::vector<std::pair<std::string, Tensor>> named_state() const;

  // Drops every parameter's gradient (so the next backward starts at zero
  // and gradient memory is freed until then).
  void zero_grad();

  // Training mode (dropout active) for this module and its descendants.
  // Modules start in training mode, as in PyTorch.
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }

  const std::vector<Module*>& children() const { return children_; }

 protected:
  // A new zero-filled f32 parameter of `shape`, requiring grad; the module
  // keeps it under `name` (which must be new among its parameters and
  // children).
  Tensor register_parameter(std::string name, const Shape& shape, bool decay = true);
  // A new zero-filled f32 buffer of `shape` (no grad), kept under `name`.
  Tensor register_buffer(std::string name, const Shape& shape);
  // Registers a child. The child lives as long as this module (a member, or
  // owned by a ModuleList); its name must be new here.
  void register_module(Module& child);

 private:
  void collect(const std::string& prefix, std::vector<NamedParameter>& out) const;
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) const;
  std::string path(const std::string& prefix) const;
  void check_new_name(const std::string& name) const;

  struct Entry {
    std::string name;
    Tensor value;
    bool decay;
  };
  std::string name_;
  std::vector<Entry> params_;
  std::vector<NamedBuffer> buffers_;  // names relative to this module
  std::vector<Module*> children_;
  bool training_ = true;
};

// An owning list of modules of one type, named "0", "1", ... (Hugging Face's
// nn.ModuleList naming: "layers.3"). A list that holds part of a longer one
// (a process's share of an MoE layer's experts) names its items from
// `first` on, so they keep the names they have in the whole list.
template <class M>
class ModuleList : public Module {
 public:
  explicit ModuleList(std::string name, size_t first = 0)
      : Module(std::move(name)), first_(first) {}

  // Appends a module; its name must be std::to_string(first() + size()).
  M& append(std::unique_ptr<M> m) {
    REPRISE_CHECK(m->name() == std::to_string(first_ + items_.size()), "ModuleList '", name(),
                  "': item ", first_ + items_.size(), " is named '", m->name(), "'");
    M& ref = *m;
    register_module(ref);
    items_.push_back(std::move(m));
    return ref;
  }
  size_t size() const { return items_.size(); }
  // The name number of item 0.
  size_t first() const { return first_; }
  M& operator[](size_t i) { return *items_.at(i); }
  const M& operator[](size_t i) const { return *items_.at(i); }

 private:
  size_t first_;
  std::vector<std::unique_ptr<M>> items_;
};

}  // namespace reprise::nn
