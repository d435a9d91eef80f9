// The budget planner: its solver against exhaustive search on small graphs,
// and record-once-apply-many on a real stack of regions.
#include "autograd/planner.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "engine/memory_stats.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "tests/support/expect_error.h"
#include "tests/support/gradcheck.h"

namespace reprise::autograd {
namespace {

// A random DAG: node n reads 1-2 values of earlier nodes; each node makes
// one value; about 70% of values are read by backward.
RegionGraph random_graph(int nodes, uint32_t seed) {
  std::mt19937 gen(seed);
  RegionGraph g;
  g.region = "r";
  g.input_bytes = 100;
  for (int n = 0; n < nodes; ++n) {
    RegionGraph::NodeInfo info{"op" + std::to_string(n % 3), double(1 + gen() % 50), {}};
    if (n > 0) {
      int reads = 1 + int(gen() % 2);
      for (int r = 0; r < reads; ++r) info.reads.push_back(int32_t(gen() % uint32_t(n)));
    }
    g.nodes.push_back(info);
    g.values.push_back({n, 0, int64_t(10 + gen() % 90), gen() % 10 < 7});
  }
  return g;
}

TEST(Planner, EvaluateMatchesHandCounts) {
  // chain a -> b -> c; backward reads a and c.
  RegionGraph g;
  g.input_bytes = 5;
  g.nodes = {{"a", 1, {}}, {"b", 10, {0}}, {"c", 100, {1}}};
  g.values = {{0, 0, 7, true}, {1, 0, 11, false}, {2, 0, 13, true}};
  auto none = g.evaluate({false, false, false});
  EXPECT_EQ(none.bytes, 5);
  EXPECT_EQ(none.flops, 111);  // c needs b needs a
  auto keep_b = g.evaluate({false, true, false});
  EXPECT_EQ(keep_b.bytes, 5 + 11);  // b held for replaying c
  EXPECT_EQ(keep_b.flops, 101);
  auto keep_ac = g.evaluate({true, false, true});
  EXPECT_EQ(keep_ac.bytes, 5 + 7 + 13);
  EXPECT_EQ(keep_ac.flops, 0);
}

// An attention-like node with two outputs that backward reads (the output
// and its logsumexp): keeping either alone still replays the node, so only
// keeping both saves its flops. Greedy must take them as one move.
TEST(Planner, GreedyKeepsAllOutputsOfANodeTogether) {
  RegionGraph g;
  g.nodes = {{"sdpa", 1000, {}}, {"cheap", 1, {}}};
  g.values = {{0, 0, 8, true}, {0, 1, 2, true}, {1, 0, 4, true}};
  std::vector<bool> keep = plan_greedy(g, 10);
  EXPECT_EQ(keep, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(g.evaluate(keep).flops, 1);
  EXPECT_EQ(keep, plan_exhaustive(g, 10));
}

TEST(Planner, PlanRegionIsOptimalAndGreedyGapIsSmall) {
  double worst_gap = 1.0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    RegionGraph g = random_graph(12, seed);
    int64_t full = g.evaluate(std::vector<bool>(g.values.size(), true)).bytes;
    for (double fraction : {0.2, 0.4, 0.7}) {
      int64_t budget = int64_t(fraction * double(full));
      auto best = g.evaluate(plan_exhaustive(g, budget));
      auto planned = g.evaluate(plan_region(g, budget));
      auto greedy = g.evaluate(plan_greedy(g, budget));
      EXPECT_LE(planned.bytes, std::max(budget, g.input_bytes));
      EXPECT_LE(greedy.bytes, std::max(budget, g.input_bytes));
      EXPECT_EQ(planned.flops, best.flops) << "seed " << seed;  // exhaustive below 16
      EXPECT_GE(greedy.flops, best.flops);
      if (best.flops > 0) worst_gap = std::max(worst_gap, greedy.flops / best.flops);
    }
  }
  // Greedy by flops per byte is not optimal; on these graphs it stays within 2x.
  EXPECT_LT(worst_gap, 2.0);
  std::printf("greedy / optimal replay flops, worst over 120 cases: %.3f\n", worst_gap);
}

TEST(Planner, RestartedGreedyIsNeverWorseThanGreedy) {
  // 18 values: above plan_region's exhaustive limit, still small enough to
  // compare with the optimum.
  double worst_greedy = 1.0, worst_restarted = 1.0;
  int strictly_better = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    RegionGraph g = random_graph(18, seed);
    int64_t full = g.evaluate(std::vector<bool>(g.values.size(), true)).bytes;
    for (double fraction : {0.3, 0.6}) {
      int64_t budget = int64_t(fraction * double(full));
      auto best = g.evaluate(plan_exhaustive(g, budget));
      auto greedy = g.evaluate(plan_greedy(g, budget));
      auto restarted = g.evaluate(plan_restarted_greedy(g, budget));
      EXPECT_LE(restarted.bytes, std::max(budget, g.input_bytes));
      EXPECT_GE(restarted.flops, best.flops) << "seed " << seed;
      EXPECT_LE(restarted.flops, greedy.flops) << "seed " << seed;
      strictly_better += restarted.flops < greedy.flops ? 1 : 0;
      if (best.flops > 0) {
        worst_greedy = std::max(worst_greedy, greedy.flops / best.flops);
        worst_restarted = std::max(worst_restarted, restarted.flops / best.flops);
      }
    }
  }
  EXPECT_GT(strictly_better, 0);
  std::printf(
      "replay flops / optimal, worst over 24 cases: greedy %.3f, restarted %.3f (%d better)\n",
      worst_greedy, worst_restarted, strictly_better);
}

// The frontier of a small region: increasing bytes, decreasing cost, and at
// every budget its best plan is the exhaustive optimum.
TEST(Planner, FrontierIsExactOnSmallGraphs) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    RegionGraph g = random_graph(12, seed);
    const std::vector<RegionPlan> front = region_frontier(g);
    ASSERT_FALSE(front.empty());
    EXPECT_EQ(front.front().cost.bytes, g.input_bytes);  // keeping nothing
    for (size_t i = 1; i < front.size(); ++i) {
      EXPECT_GT(front[i].cost.bytes, front[i - 1].cost.bytes);
      EXPECT_LT(front[i].cost.cost, front[i - 1].cost.cost);
    }
    const int64_t full = g.evaluate(std::vector<bool>(g.values.size(), true)).bytes;
    for (int64_t budget = g.input_bytes; budget <= full; budget += 37) {
      double best_in_front = std::numeric_limits<double>::infinity();
      for (const RegionPlan& p : front) {
        if (p.cost.bytes <= budget) best_in_front = p.cost.cost;
      }
      EXPECT_EQ(best_in_front, g.evaluate(plan_exhaustive(g, budget)).cost)
          << "seed " << seed << " budget " << budget;
    }
  }
}

// Across regions: the chosen plans are the cheapest combination that fits,
// by brute force over every combination of frontier points.
TEST(Planner, ChoosePlansIsTheOptimumOverRegions) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::vector<std::vector<RegionPlan>> fronts;
    int64_t least = 0, most = 0;
    for (uint32_t r = 0; r < 3; ++r) {
      RegionGraph g = random_graph(9, 100 * seed + r);
      fronts.push_back(region_frontier(g));
      least += fronts.back().front().cost.bytes;
      most += fronts.back().back().cost.bytes;
    }
    for (int64_t budget = least; budget <= most; budget += (most - least) / 13 + 1) {
      double best = std::numeric_limits<double>::infinity();
      for (const RegionPlan& a : fronts[0]) {
        for (const RegionPlan& b : fronts[1]) {
          for (const RegionPlan& c : fronts[2]) {
            if (a.cost.bytes + b.cost.bytes + c.cost.bytes <= budget) {
              best = std::min(best, a.cost.cost + b.cost.cost + c.cost.cost);
            }
          }
        }
      }
      const std::vector<size_t> chosen = choose_plans(fronts, budget);
      int64_t bytes = 0;
      double cost = 0;
      for (size_t r = 0; r < 3; ++r) {
        bytes += fronts[r][chosen[r]].cost.bytes;
        cost += fronts[r][chosen[r]].cost.cost;
      }
      EXPECT_LE(bytes, budget);
      EXPECT_EQ(cost, best) << "seed " << seed << " budget " << budget;
    }
    // Below the least memory the regions can hold: each keeps nothing.
    EXPECT_EQ(choose_plans(fronts, least - 1), (std::vector<size_t>{0, 0, 0}));
  }
}

// Two identical regions whose one value costs 100 to replay: a budget with
// room for one copy keeps it in one region, which equal shares never would.
TEST(Planner, IdenticalRegionsMayTakeDifferentPlans) {
  RegionGraph g;
  g.nodes = {{"matmul", 100, {}}};
  g.values = {{0, 0, 10, true}};
  const std::vector<RegionPlan> front = region_frontier(g);
  ASSERT_EQ(front.size(), 2u);
  const std::vector<size_t> chosen = choose_plans({front, front}, 10);
  EXPECT_EQ(chosen[0] + chosen[1], 1u);
  EXPECT_EQ(choose_plans({front, front}, 9), (std::vector<size_t>{0, 0}));
}

// A memory-bound node (few flops, many bytes moved) beside a compute-bound
// one, room to keep one output: counting flops alone keeps the matmul's;
// pricing bytes at 10 flops keeps the elementwise op's.
TEST(Planner, BytesMovedPriceMemoryBoundReplays) {
  RegionGraph g;
  g.nodes = {{"matmul", 100, {}, 1}, {"add", 1, {}, 50}};
  g.values = {{0, 0, 10, true}, {1, 0, 10, true}};
  EXPECT_EQ(plan_region(g, 10), (std::vector<bool>{true, false}));
  g.model.flops_per_byte = 10;
  EXPECT_EQ(g.evaluate({false, false}).cost, 100 + 10 * 1 + 1 + 10 * 50);
  EXPECT_EQ(plan_region(g, 10), (std::vector<bool>{false, true}));
  testing::expect_error([] { BudgetPlanner p(100, {.flops_per_byte = -1}); },
                        {"BudgetPlanner", "flops_per_byte", "-1"});
}

Tensor gated_block(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor a = ops::tanh(ops::mul(x, w));
  Tensor g = ops::silu(ops::add(x, b));
  return ops::add(x, ops::mul(a, g));
}

TEST(Planner, RecordOnceApplyManyStaysWithinBudgetAndIsExact) {
  const int layers = 6;
  const int64_t width = 1024;
  std::vector<Tensor> w, b;
  for (int i = 0; i < layers; ++i) {
    w.push_back(testing::uniform({width}, -1, 1, 300 + i, DType::f32).requires_grad(true));
    b.push_back(testing::uniform({width}, -1, 1, 400 + i, DType::f32).requires_grad(true));
    w.back().storage()->set_kind(MemoryKind::parameter);
    b.back().storage()->set_kind(MemoryKind::parameter);
  }
  Tensor x = testing::uniform({2, width}, -1, 1, 17, DType::f32);
  const int64_t act = 2 * width * 4;        // one activation of the block's shape
  BudgetPlanner planner(layers * 3 * act);  // room for about 2 of each block's 4 saved values

  auto step = [&](const Policy* p, int64_t* held) {
    for (auto& t : w) t.set_grad(Tensor());
    Tensor h = x;
    int64_t before = memory_stats::snapshot()[MemoryKind::saved_activation].live;
    for (int i = 0; i < layers; ++i) {
      auto f = [&, i, in = h] { return gated_block(in, w[size_t(i)], b[size_t(i)]); };
      h = p ? checkpoint("layers." + std::to_string(i), *p, f) : f();
    }
    if (held) *held = memory_stats::snapshot()[MemoryKind::saved_activation].live - before;
    backward(ops::sum(h));
    std::vector<std::vector<float>> g;
    for (auto& t : w) g.push_back(t.grad().to_vector<float>());
    return g;
  };
  auto expected = step(nullptr, nullptr);
  Policy policy = planner.policy();
  EXPECT_EQ(step(&policy, nullptr), expected);  // recording step: recomputes everything
  planner.plan();
  BudgetPlanner::Summary s = planner.summary();
  EXPECT_LE(s.planned_bytes, s.budget);
  EXPECT_LT(s.replay_flops, s.full_replay_flops);
  EXPECT_GT(s.values_kept, 0);
  int64_t held = 0;
  EXPECT_EQ(step(&policy, &held), expected);  // applied: bitwise equal
  // Region-held bytes as MemoryStats sees them, plus the final output's
  // consumer (outside any region), stay within the budget.
  EXPECT_LE(held, s.budget + act);
}

}  // namespace
}  // namespace reprise::autograd
