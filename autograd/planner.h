#pragma once
// A budget planner for checkpoint regions: record once, apply many.
//
// Step 1 (recording): run one training step with planner.policy() on every
// region. It saves everything and records each region's graph: the values
// its nodes produce (bytes), which of them backward reads (saved slots),
// and which values each node reads, with each node's flops from OpInfo.
// Step 2: planner.plan() chooses which values to keep. Later steps run with
// the same policy, which now applies the plan (as PREFER decisions, so a
// scope's MUST still wins, e.g. a force-saved router).
//
// What it optimizes, exactly: over keep/recompute choices for the values of
// all regions, minimize the flops that replay re-executes (the nodes that
// produce dropped values and, transitively, the recomputed values those
// nodes read) subject to
//     region inputs (non-parameter) + kept values that backward or replay reads <= budget.
// This is the memory the regions hold after their forward exits; saved
// tensors outside regions, and the transient of the region whose forward is
// running, are not counted. The solver is exact (branch and bound) for up
// to 16 candidate values per region (exhaustive search); above that, up to
// 64, the best of greedy runs by flops saved per byte, each started from a
// different first move (one greedy run alone can spend a budget on small
// values and leave no room for one large value that saves more: in a
// transformer block it kept q, k, v and attention's output, 62% of full
// replay, where attention's output and the gate projection's replay 55%);
// plain greedy above 64. A test measures the gaps on random graphs.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/policy.h"
#include "autograd/region_graph.h"

namespace reprise::autograd {

// Exhaustive optimum over all keep sets of the values backward reads
// (2^n; for tests and small graphs). Returns the keep set.
std::vector<bool> plan_exhaustive(const RegionGraph& g, int64_t budget);
// Greedy by flops saved per byte added, within the budget.
std::vector<bool> plan_greedy(const RegionGraph& g, int64_t budget);
// The best of plan_greedy and of greedy runs started from each single move.
std::vector<bool> plan_restarted_greedy(const RegionGraph& g, int64_t budget);
// The planner's solver for one region: exhaustive up to 16 candidate values,
// restarted greedy up to 64, plain greedy above.
std::vector<bool> plan_region(const RegionGraph& g, int64_t budget);

class BudgetPlanner {
 public:
  explicit BudgetPlanner(int64_t budget_bytes);

  // The policy to pass to checkpoint(): records until plan(), then applies.
  Policy policy();
  // Splits the budget over the recorded regions and plans each.
  void plan();
  bool planned() const;

  struct Summary {
    int64_t budget = 0;
    int64_t planned_bytes = 0;  // what the plan holds, by RegionGraph::evaluate
    double replay_flops = 0;
    double full_replay_flops = 0;  // with everything recomputed
    int64_t values_kept = 0;
    int64_t values = 0;
  };
  Summary summary() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace reprise::autograd
