#pragma once
// A budget planner for checkpoint regions: record once, apply many.
//
// Step 1 (recording): run one training step with planner.policy() on every
// region. It recomputes everything, as policies::full() does (so a run that
// fits with the plan fits from its first step), and records each region's
// graph: the values its nodes produce (bytes), which of them backward reads
// (saved slots), and which values each node reads, with flops and bytes.
// Step 2: planner.plan() chooses which values to keep. Later steps run with
// the same policy, which now applies the plan (as PREFER decisions, so a
// scope's MUST still wins, e.g. a force-saved router).
//
// What it optimizes, exactly: over keep/recompute choices for the values of
// all regions, minimize the replay cost (RegionGraph::evaluate: the nodes
// that produce dropped values and, transitively, the recomputed values those
// nodes read, each priced by a ReplayCostModel: its flops plus
// flops_per_byte per byte it moves) subject to
//     sum over regions of (region inputs (non-parameter)
//                          + kept values that backward or replay reads) <= budget.
// This is the memory the regions hold after their forward exits; saved
// tensors outside regions, and the transient of the region whose forward is
// running, are not counted.
//
// Two levels. Each region's keep sets are reduced to its frontier: for each
// amount of memory, the cheapest replay that fits in it (keep sets that are
// dearer and no smaller are never worth taking). The frontier is exact for
// up to 16 candidate values per region (every keep set evaluated); above
// that it is made of the solver's plans at 33 budgets across the region's
// range (the best of greedy runs by cost saved per byte, each started from a
// different first move, up to 64 candidates: one greedy run alone can spend
// a budget on small values and leave no room for one large value that saves
// more; plain greedy above 64). Then one frontier point per region is
// chosen so that the sum of costs is least within the budget (a
// multiple-choice knapsack, solved by dynamic programming over the budget in
// 2^14 steps; sizes round up to a step, so the choice always fits and is
// optimal up to that rounding). Regions
// with the same graph share one frontier, and identical regions may get
// different plans when that is cheaper: in the 4-block stack of
// bench/autograd/checkpoint.cpp at 30% of the no-checkpoint peak, three
// blocks keep q, k, v, attention's output and the residual stream after
// attention, and the fourth keeps one projection less. Each frontier also
// holds the region's plan at a share of the budget proportional to its
// size, so the choice is never worse than planning regions apart on such
// shares. Tests compare both levels with exhaustive search.

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
// Greedy by cost saved per byte added, within the budget.
std::vector<bool> plan_greedy(const RegionGraph& g, int64_t budget);
// The best of plan_greedy and of greedy runs started from each single move.
std::vector<bool> plan_restarted_greedy(const RegionGraph& g, int64_t budget);
// The planner's solver for one region: exhaustive up to 16 candidate values,
// restarted greedy up to 64, plain greedy above.
std::vector<bool> plan_region(const RegionGraph& g, int64_t budget);

// One keep set of a region and what it costs.
struct RegionPlan {
  std::vector<bool> keep;
  RegionGraph::Cost cost;
};
// A region's frontier: plans by increasing bytes and strictly decreasing
// cost, the first the least memory the region can hold. `budgets` adds the
// solver's plans at those budgets to a frontier that is not exhaustive.
std::vector<RegionPlan> region_frontier(const RegionGraph& g,
                                        const std::vector<int64_t>& budgets = {});
// One plan per region (an index into each frontier) with the least total
// cost whose total bytes fit in `budget`; when none fits, each region's
// smallest plan.
std::vector<size_t> choose_plans(const std::vector<std::vector<RegionPlan>>& frontiers,
                                 int64_t budget);

class BudgetPlanner {
 public:
  // The default model prices bytes moved as a CPU does (ReplayCostModel).
  explicit BudgetPlanner(int64_t budget_bytes, ReplayCostModel model = {.flops_per_byte = 10});

  // The policy to pass to checkpoint(): records until plan(), then applies.
  Policy policy();
  // Plans the recorded regions together (see above).
  void plan();
  bool planned() const;

  struct Summary {
    int64_t budget = 0;
    int64_t planned_bytes = 0;  // what the plan holds, by RegionGraph::evaluate
    double replay_flops = 0;
    double full_replay_flops = 0;  // with everything recomputed
    double replay_cost = 0;        // by the cost model
    double full_replay_cost = 0;
    int64_t values_kept = 0;
    int64_t values = 0;
  };
  Summary summary() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace reprise::autograd
