#pragma once
// Activation checkpointing of a model's decoder layers, in one place: the
// configuration (which policy, how recompute gets its random numbers, the
// verifier, noise, the MoE router), parsed from the trainers' flags and
// kept in training checkpoints, and the object that runs each layer under
// it (LlamaForCausalLM::forward's LayerRunner) and owns the budget
// planner's life cycle. The model itself knows nothing of it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "autograd/checkpoint.h"
#include "autograd/planner.h"
#include "autograd/policy.h"
#include "io/json.h"
#include "nn/moe.h"
#include "rng/generator.h"

namespace reprise::nn {

struct CheckpointConfig {
  enum class Kind {
    none,            // plain recording: everything saved
    full,            // every layer, policies::full(): keep only its input
    every_n_layers,  // layers 0, n, 2n, ... with policies::full(); the rest plain
    op_sac,          // every layer, policies::op_sac(op_sac_ops()) (torchtitan's op-level SAC)
    budget,          // every layer, a BudgetPlanner for budget_bytes
    policy,          // every layer, `policy`
  };
  Kind kind = Kind::none;
  int every_n = 2;
  int64_t budget_bytes = 0;
  std::optional<autograd::Policy> policy;  // Kind::policy
  // How a replay gets its random numbers, the verifier, and noise injection
  // (autograd/checkpoint.h). Exact replay (recorded, no noise) makes the
  // policy a matter of memory and time, never of values.
  autograd::RngReplay rng_replay = autograd::RngReplay::recorded;
  autograd::Verify verify = autograd::Verify::none;
  autograd::OnMismatch on_mismatch = autograd::OnMismatch::raise;  // of the verifier
  int recompute_noise_ulps = 0;
  uint64_t noise_seed = autograd::CheckpointOptions{}.noise_seed;  // study: one draw of noise
  std::string noise_scopes = "*";  // study: perturb only under these scopes
  // MoE: the outputs of every node under "*.<moe block>.gate" (router
  // logits, scores, the routing decision) are force-saved, combined with the
  // layer policy, so a recompute never re-decides routing; false recomputes
  // the router like everything else the policy recomputes.
  bool save_router = true;
  // DeltaNet: where the policy saves the gated delta rule's output
  // (op-SAC), its chunk states (the recurrent state before every 64th
  // position, kept for backward only) are saved too; false force-recomputes
  // them (policies::recompute_auxiliary): backward then runs the recurrence
  // once more from the op's inputs, which it replays anyway. At Qwen3-Next's
  // shape they are 4x a layer's input (docs/checkpointing-study.md).
  bool save_chunk_states = true;

  // The policy from "none", "full", "every-n-layers" (n = 2) or
  // "every-n-layers:N", "op-sac", "budget:BYTES" (an integer with an
  // optional K, M or G suffix, powers of 1024); the other fields keep their
  // defaults. Raises an Error listing the forms.
  static CheckpointConfig parse(std::string_view policy_spec);
  // The policy from such a spec; the other fields stay as they are.
  void set_policy(std::string_view policy_spec);
  // The parse() form of the policy ("policy:<name>" for Kind::policy).
  std::string policy_string() const;
  // Raises an Error naming the first field out of range.
  void validate() const;
  // The fields a trainer sets, as members of a JSON object
  // (checkpoint_policy, rng_replay, verify, recompute_noise_ulps,
  // save_router, save_chunk_states), and back; a missing save_router or
  // save_chunk_states reads as its default.
  // Raises an Error naming `where`.
  void write_json(json::Value& object) const;
  static CheckpointConfig read_json(const json::Value& object, const std::string& where);
};

// "recorded" | "stash" | "fresh" and "none" | "metadata" | "bitwise"; raise
// an Error listing the choices.
autograd::RngReplay parse_rng_replay(const std::string& s);
autograd::Verify parse_verify(const std::string& s);

// The ops whose outputs op-level SAC saves: the attention kernels, and every
// second "linear" (policies::op_sac), as torchtitan's save list (mm, sdpa)
// does; and the gated delta rule, a DeltaNet layer's attention (its output
// and, unless CheckpointConfig::save_chunk_states is false, its chunk
// states: a replay then recomputes the rest of the layer but not the
// recurrence).
std::vector<std::string> op_sac_ops();

// Runs decoder layers as a CheckpointConfig says: layer i under
// autograd::checkpoint("model.layers.<i>", ...) when the config selects it,
// else plainly under its scope. With Kind::budget, the first forward with
// grad recomputes everything and records each layer's graph, the next plans
// from that recording, and every forward after applies the plan.
class LayerCheckpointing {
 public:
  // `generator` is what the stash and fresh replay modes draw from (the
  // model's dropout generator); this object and the regions it records
  // share it. `moe`: the module names of the model's MoE layers and their
  // routers (moe_scopes_of(config)), empty for a dense model.
  LayerCheckpointing(CheckpointConfig config, std::shared_ptr<rng::Generator> generator,
                     const MoeScopes& moe = {});

  // LlamaForCausalLM's LayerRunner: runs `layer` (decoder layer i) under
  // `scope`.
  Tensor run(size_t i, const std::string& scope, const std::function<Tensor()>& layer);
  // run() as a LayerRunner bound to this object.
  std::function<Tensor(size_t, const std::string&, const std::function<Tensor()>&)> runner();

  const CheckpointConfig& config() const { return config_; }
  // The budget planner (Kind::budget only; nullptr otherwise), for its summary.
  const autograd::BudgetPlanner* planner() const { return planner_ ? &*planner_ : nullptr; }

 private:
  CheckpointConfig config_;
  autograd::CheckpointOptions options_;
  std::optional<autograd::Policy> policy_;  // what checkpointed layers use
  std::optional<autograd::BudgetPlanner> planner_;
  bool planner_recorded_ = false;
};

}  // namespace reprise::nn
