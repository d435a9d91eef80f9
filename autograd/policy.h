#pragma once
// Recompute policies: named predicates that decide, for each value a
// checkpoint region produces, whether backward reads it from memory or
// recomputes it by replaying the recorded ops (JAX's "policies are
// predicates"; PyTorch SAC's four-way vocabulary).
//
// A policy may abstain (std::nullopt). Across nested regions, and inside
// policies::combine, the first MUST (innermost first) wins; otherwise the
// first PREFER; when every policy abstains the value is recomputed, which is
// what a checkpoint region is for.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/region_graph.h"

namespace reprise::autograd {

enum class Decision { must_save, prefer_save, prefer_recompute, must_recompute };
const char* decision_name(Decision d);
inline bool is_save(Decision d) { return d == Decision::must_save || d == Decision::prefer_save; }
inline bool is_must(Decision d) {
  return d == Decision::must_save || d == Decision::must_recompute;
}

// What a policy sees of one value: output `output` of a recorded node.
struct ValueInfo {
  const char* op;             // the producing op ("linear", "sdpa", ...)
  const std::string& scope;   // the producing node's scope ("layers.3.attn.q_proj")
  const std::string& region;  // the innermost region's scope
  uint32_t output;            // which output of the node
  bool auxiliary;             // an output kept for backward only (e.g. logsumexp)
  bool is_random;             // the producing op draws random numbers
  const TensorMeta& meta;
  int64_t bytes;       // size of the value
  double flops;        // cost of recomputing the producing node alone
  int64_t op_ordinal;  // earlier nodes of the same op in the region (0 for the first)
  int64_t node_index;  // position of the producing node in the region
};

class Policy {
 public:
  using Fn = std::function<std::optional<Decision>(const ValueInfo&)>;
  Policy(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  const std::string& name() const { return name_; }
  std::optional<Decision> operator()(const ValueInfo& v) const { return fn_(v); }

  // Called with each region's graph at the exit of a region that uses this
  // policy (the budget planner records through it).
  using RegionHook = std::function<void(const RegionGraph&)>;
  Policy& on_region(RegionHook hook) {
    region_hook_ = std::move(hook);
    return *this;
  }
  const RegionHook& region_hook() const { return region_hook_; }

 private:
  std::string name_;
  Fn fn_;
  RegionHook region_hook_;
};

// The combination rule shared by nested regions and policies::combine.
std::optional<Decision> resolve(const std::vector<std::optional<Decision>>& innermost_first);

// Shell-style glob: '*' matches any run of characters (dots included), '?'
// one character.
bool glob_match(std::string_view pattern, std::string_view text);

namespace policies {

// Recompute everything; keep only the region's inputs (classic checkpointing).
Policy full();
// Save everything (a region that only records; useful for nesting and study).
Policy save_all();
// Ops are named as registered (autograd/op_registry.h); an unknown name is
// an Error that lists the closest registered ones.
//
// Save the outputs of the named ops, recompute the rest (selective AC).
Policy save_ops(std::vector<std::string> ops);
// Save outputs of `op` for every n-th node of it in the region (the 1st,
// (n+1)-th, ...), recompute the others; abstain on other ops.
Policy save_every_nth(std::string op, int n);
// torchtitan's op-level selective AC: save the outputs of `ops`, except that
// of the matmul-like op `matmul_op` only every second one is saved.
Policy op_sac(std::vector<std::string> ops, std::string matmul_op = "linear");
// Force-save / force-recompute values produced under matching scopes
// (e.g. "*.router.*"); abstain elsewhere.
Policy save_scopes(std::string glob);
Policy recompute_scopes(std::string glob);
// Force-recompute the auxiliary outputs of op `op`, the values it keeps
// for its backward only (sdpa's logsumexp, gated_delta_rule's chunk
// states); abstain elsewhere. Backward then replays the op from its inputs
// whatever saves its public outputs.
Policy recompute_auxiliary(std::string op);
// A user predicate.
Policy predicate(std::string name, Policy::Fn fn);
// First MUST among the parts, else first PREFER, else abstain.
Policy combine(std::vector<Policy> parts);

}  // namespace policies
}  // namespace reprise::autograd
