#pragma once
// Activation checkpointing as a transform of the recorded graph.
//
//   Tensor y = autograd::checkpoint("layers.3", policies::full(), [&] { return block(x); });
//
// fn runs once, under Scope(scope), and its ops are recorded as usual. At
// region exit the policy decides, for every value the region produced,
// whether backward reads it from memory or recomputes it. Recomputed values
// are dropped from the tape there and then (so the forward's peak memory
// falls); when backward first needs one, the region replays the minimal
// recorded subgraph that produces the dropped values — the recorded ops on
// their recorded inputs with their recorded RNG reservations, never fn
// again — and frees each replayed value once its consumer has run. A region
// replays at most once per backward.
//
// Interplay: ops under NoGradGuard inside a region are not recorded, so
// their results are held as region inputs. Region inputs are held with
// their version: writing one in place (before backward, or inside the
// region after a node read it) makes backward raise instead of replaying
// wrong values. Backward has no create_graph, so there is no double
// backward, through regions or otherwise. Errors raised inside fn or during
// replay name the region.

#include <functional>
#include <memory>
#include <string>

#include "autograd/policy.h"
#include "autograd/verifier.h"

namespace reprise::rng {
class Generator;
}

namespace reprise::autograd {

// How random ops get their numbers on replay.
enum class RngReplay {
  recorded,  // the reservation recorded in the forward: exact, nothing stashed (default)
  stash,     // PyTorch preserve_rng_state=True: copy generator state at region
             // entry, restore it for replay and reserve again in recording order
  fresh,     // PyTorch preserve_rng_state=False: new numbers on replay (wrong
             // gradients with dropout, on purpose)
};
const char* rng_replay_name(RngReplay mode);

struct CheckpointOptions {
  RngReplay rng = RngReplay::recorded;
  // What stash and fresh draw from (null: rng::default_generator()). A
  // region keeps it until it has replayed, so it is shared, never borrowed.
  std::shared_ptr<rng::Generator> generator;
  Verify verify = Verify::none;
  OnMismatch on_mismatch = OnMismatch::raise;
  int recompute_noise_ulps = 0;  // study: perturb replayed floating outputs by up to k ulps
  uint64_t noise_seed = 0x5EED;
  // Study: noise perturbs only the replayed outputs of nodes whose scope
  // matches this glob (glob_match), e.g. "*.block_sparse_moe.gate" to
  // emulate one non-bit-exact kernel (the router's gate matmul).
  std::string noise_scopes = "*";
};

// Options used by checkpoint() calls that pass none (a trainer sets these
// once from its flags). Per thread.
CheckpointOptions& default_checkpoint_options();

Tensors checkpoint(const std::string& scope, const Policy& policy,
                   const std::function<Tensors()>& fn, const CheckpointOptions& options);
Tensors checkpoint(const std::string& scope, const Policy& policy,
                   const std::function<Tensors()>& fn);
Tensor checkpoint(const std::string& scope, const Policy& policy,
                  const std::function<Tensor()>& fn);
Tensor checkpoint(const std::string& scope, const Policy& policy, const std::function<Tensor()>& fn,
                  const CheckpointOptions& options);

// Splits `stages` into `segments` consecutive groups and checkpoints each
// group as one region ("<scope>.<first stage index>"), chaining x through.
Tensor checkpoint_sequential(const std::string& scope,
                             const std::vector<std::function<Tensor(const Tensor&)>>& stages,
                             int segments, const Tensor& x, const Policy& policy);

// Counters over all regions on this thread (for benchmarks and the study).
struct RecomputeStats {
  int64_t regions = 0;            // regions recorded
  int64_t values_dropped = 0;     // values the policies chose to recompute
  int64_t bytes_dropped = 0;      // their size
  int64_t replays = 0;            // region replays run
  int64_t nodes_replayed = 0;     // ops re-executed
  int64_t rng_bytes_stashed = 0;  // generator state copied (stash mode)
  int64_t mismatches = 0;         // verifier mismatches
  double replay_seconds = 0;      // wall time spent replaying (a replay that another
                                  // triggers counts once, in the outer one)
};
RecomputeStats& recompute_stats();
// The counts between two readings: after - before, field by field.
RecomputeStats operator-(const RecomputeStats& after, const RecomputeStats& before);

}  // namespace reprise::autograd
