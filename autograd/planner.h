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
// to 16 candidate values per region (exhaustive search) and greedy by flops
// saved per byte above that; a test measures the greedy gap on small graphs.

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
// The planner's solver for one region: exhaustive when small, else greedy.
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
