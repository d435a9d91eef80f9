#include "autograd/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

namespace reprise::autograd {

RegionGraph::Cost RegionGraph::evaluate(const std::vector<bool>& keep) const {
  // Mirrors Region::finish: values backward reads and the plan does not keep
  // are dropped; their producers replay, and so, transitively, do producers
  // of recomputed values a replayed node reads. Kept values that backward or
  // replay reads stay in memory.
  std::vector<bool> replayed(nodes.size(), false), held(values.size(), false);
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v].read_by_backward && !keep[v]) replayed[size_t(values[v].node)] = true;
  }
  for (size_t n = nodes.size(); n-- > 0;) {
    if (!replayed[n]) continue;
    for (int32_t v : nodes[n].reads) {
      if (keep[size_t(v)])
        held[size_t(v)] = true;
      else
        replayed[size_t(values[size_t(v)].node)] = true;
    }
  }
  Cost c{input_bytes, 0.0, 0.0};
  for (size_t v = 0; v < values.size(); ++v) {
    if (keep[v] && (values[v].read_by_backward || held[v])) c.bytes += values[v].bytes;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!replayed[n]) continue;
    c.flops += nodes[n].flops;
    c.cost += nodes[n].flops + model.flops_per_byte * nodes[n].bytes_moved;
  }
  return c;
}

namespace {

// Values whose keeping can matter: read by backward or by some node.
std::vector<int32_t> candidates(const RegionGraph& g) {
  std::vector<bool> read(g.values.size(), false);
  for (const auto& n : g.nodes) {
    for (int32_t v : n.reads) read[size_t(v)] = true;
  }
  std::vector<int32_t> out;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (read[v] || g.values[v].read_by_backward) out.push_back(int32_t(v));
  }
  return out;
}

bool better(const RegionGraph::Cost& a, const RegionGraph::Cost& b) {
  return a.cost < b.cost || (a.cost == b.cost && a.bytes < b.bytes);
}

// Calls fn(keep, cost) for every keep set of the candidate values (2^n).
template <class Fn>
void for_each_keep_set(const RegionGraph& g, const char* caller, const Fn& fn) {
  std::vector<int32_t> cand = candidates(g);
  REPRISE_CHECK(cand.size() <= 24, caller, ": ", cand.size(),
                " candidate values is too many for exhaustive search");
  std::vector<bool> keep(g.values.size(), false);
  for (uint64_t mask = 0; mask < (uint64_t(1) << cand.size()); ++mask) {
    for (size_t i = 0; i < cand.size(); ++i) keep[size_t(cand[i])] = (mask >> i) & 1;
    fn(keep, g.evaluate(keep));
  }
}

}  // namespace

std::vector<bool> plan_exhaustive(const RegionGraph& g, int64_t budget) {
  std::vector<bool> best(g.values.size(), false);
  RegionGraph::Cost best_cost = g.evaluate(best);
  for_each_keep_set(g, "plan_exhaustive", [&](const std::vector<bool>& keep, const auto& c) {
    if (c.bytes <= budget && better(c, best_cost)) {
      best_cost = c;
      best = keep;
    }
  });
  return best;
}

namespace {

// Greedy moves: keep one candidate value, or every candidate output of one
// node at once. A node replays while any output that is read stays dropped,
// so keeping one output of a multi-output node (an attention kernel's output
// and its logsumexp, a norm's output and its rstd) alone saves nothing and a
// single-value greedy would never take it.
std::vector<std::vector<int32_t>> greedy_moves(const RegionGraph& g) {
  std::vector<std::vector<int32_t>> moves;
  std::vector<std::vector<int32_t>> by_node(g.nodes.size());
  for (int32_t v : candidates(g)) {
    moves.push_back({v});
    by_node[size_t(g.values[size_t(v)].node)].push_back(v);
  }
  for (auto& group : by_node) {
    if (group.size() > 1) moves.push_back(std::move(group));
  }
  return moves;
}

struct Plan {
  std::vector<bool> keep;
  RegionGraph::Cost cost;
};

// From `keep` (whose cost is `cur`), repeatedly takes the move that saves the
// most cost per byte added while the budget holds.
Plan greedy_from(const RegionGraph& g, int64_t budget,
                 const std::vector<std::vector<int32_t>>& moves, std::vector<bool> keep,
                 RegionGraph::Cost cur) {
  for (;;) {
    const std::vector<int32_t>* pick = nullptr;
    double best_score = 0;
    RegionGraph::Cost pick_cost = cur;
    for (const auto& move : moves) {
      std::vector<bool> trial = keep;
      bool adds = false;
      for (int32_t v : move) {
        adds = adds || !trial[size_t(v)];
        trial[size_t(v)] = true;
      }
      if (!adds) continue;
      RegionGraph::Cost c = g.evaluate(trial);
      double saved = cur.cost - c.cost;
      if (c.bytes > budget || saved <= 0) continue;
      double score = saved / double(std::max<int64_t>(c.bytes - cur.bytes, 1));
      if (score > best_score) {
        best_score = score;
        pick = &move;
        pick_cost = c;
      }
    }
    if (pick == nullptr) return {std::move(keep), cur};
    for (int32_t v : *pick) keep[size_t(v)] = true;
    cur = pick_cost;
  }
}

// Greedy from keeping nothing.
Plan greedy_from_empty(const RegionGraph& g, int64_t budget,
                       const std::vector<std::vector<int32_t>>& moves) {
  std::vector<bool> none(g.values.size(), false);
  const RegionGraph::Cost cost = g.evaluate(none);
  return greedy_from(g, budget, moves, std::move(none), cost);
}

}  // namespace

std::vector<bool> plan_greedy(const RegionGraph& g, int64_t budget) {
  return greedy_from_empty(g, budget, greedy_moves(g)).keep;
}

std::vector<bool> plan_restarted_greedy(const RegionGraph& g, int64_t budget) {
  const std::vector<std::vector<int32_t>> moves = greedy_moves(g);
  Plan best = greedy_from_empty(g, budget, moves);
  for (const auto& first : moves) {
    std::vector<bool> keep(g.values.size(), false);
    for (int32_t v : first) keep[size_t(v)] = true;
    const RegionGraph::Cost start = g.evaluate(keep);
    if (start.bytes > budget) continue;
    Plan p = greedy_from(g, budget, moves, std::move(keep), start);
    if (better(p.cost, best.cost)) best = std::move(p);
  }
  return best.keep;
}

std::vector<bool> plan_region(const RegionGraph& g, int64_t budget) {
  const size_t n = candidates(g).size();
  if (n <= 16) return plan_exhaustive(g, budget);
  return n <= 64 ? plan_restarted_greedy(g, budget) : plan_greedy(g, budget);
}

namespace {

// The plans that no other plan beats in both bytes and cost, by increasing
// bytes (and so decreasing cost).
std::vector<RegionPlan> pareto(std::vector<RegionPlan> plans) {
  std::sort(plans.begin(), plans.end(), [](const RegionPlan& a, const RegionPlan& b) {
    return a.cost.bytes < b.cost.bytes ||
           (a.cost.bytes == b.cost.bytes && a.cost.cost < b.cost.cost);
  });
  std::vector<RegionPlan> front;
  for (RegionPlan& p : plans) {
    if (front.empty() || p.cost.cost < front.back().cost.cost) front.push_back(std::move(p));
  }
  return front;
}

}  // namespace

std::vector<RegionPlan> region_frontier(const RegionGraph& g, const std::vector<int64_t>& budgets) {
  std::vector<RegionPlan> plans;
  if (candidates(g).size() <= 16) {
    // Per byte count, the cheapest keep set; then the frontier of those.
    std::map<int64_t, RegionPlan> cheapest;
    for_each_keep_set(g, "region_frontier", [&](const std::vector<bool>& keep, const auto& c) {
      auto [it, added] = cheapest.try_emplace(c.bytes, RegionPlan{keep, c});
      if (!added && c.cost < it->second.cost.cost) it->second = {keep, c};
    });
    for (auto& [bytes, plan] : cheapest) plans.push_back(std::move(plan));
  } else {
    // The solver's plans at 33 budgets from holding nothing to holding
    // every value that is read, and at the caller's.
    const int64_t least = g.evaluate(std::vector<bool>(g.values.size(), false)).bytes;
    const int64_t most = g.evaluate(std::vector<bool>(g.values.size(), true)).bytes;
    std::vector<int64_t> all = budgets;
    for (int k = 0; k <= 32; ++k) all.push_back(least + (most - least) * k / 32);
    for (int64_t b : all) {
      std::vector<bool> keep = plan_region(g, b);
      const RegionGraph::Cost c = g.evaluate(keep);
      plans.push_back({std::move(keep), c});
    }
  }
  return pareto(std::move(plans));
}

std::vector<size_t> choose_plans(const std::vector<std::vector<RegionPlan>>& frontiers,
                                 int64_t budget) {
  for (const auto& f : frontiers) {
    REPRISE_CHECK(!f.empty(), "choose_plans: a region has an empty frontier");
  }
  std::vector<size_t> smallest(frontiers.size(), 0);
  // Budget in kSteps units; a plan's size rounds up to whole units, so any
  // choice the table allows fits in the budget.
  constexpr int64_t kSteps = int64_t(1) << 14;
  const int64_t unit = std::max<int64_t>(1, (std::max<int64_t>(budget, 0) + kSteps - 1) / kSteps);
  const auto capacity = size_t(std::max<int64_t>(budget, 0) / unit);
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // least[c]: least total cost of the regions so far within c units;
  // pick[r][c]: the plan region r takes there.
  std::vector<double> least(capacity + 1, 0.0), next(capacity + 1);
  std::vector<std::vector<uint32_t>> pick(frontiers.size(), std::vector<uint32_t>(capacity + 1));
  for (size_t r = 0; r < frontiers.size(); ++r) {
    std::fill(next.begin(), next.end(), kNone);
    for (size_t p = 0; p < frontiers[r].size(); ++p) {
      const RegionPlan& plan = frontiers[r][p];
      const int64_t units = (plan.cost.bytes + unit - 1) / unit;
      for (size_t c = size_t(units); c <= capacity; ++c) {
        const double total = least[c - size_t(units)] + plan.cost.cost;
        if (total < next[c]) {
          next[c] = total;
          pick[r][c] = uint32_t(p);
        }
      }
    }
    least.swap(next);
  }
  if (least[capacity] == kNone) return smallest;
  std::vector<size_t> chosen(frontiers.size());
  size_t c = capacity;
  for (size_t r = frontiers.size(); r-- > 0;) {
    chosen[r] = pick[r][c];
    c -= size_t((frontiers[r][chosen[r]].cost.bytes + unit - 1) / unit);
  }
  return chosen;
}

// ---- BudgetPlanner ------------------------------------------------------------

namespace {

// A region's graph without its name: regions with equal shapes share one
// frontier.
std::string shape_of(const RegionGraph& g) {
  std::ostringstream out;
  out.precision(17);
  out << g.input_bytes << ';';
  for (const auto& n : g.nodes) {
    out << n.op << ',' << n.flops << ',' << n.bytes_moved;
    for (int32_t v : n.reads) out << ',' << v;
    out << ';';
  }
  for (const auto& v : g.values) {
    out << v.node << ',' << v.output << ',' << v.bytes << ',' << v.read_by_backward << ';';
  }
  return out.str();
}

}  // namespace

struct BudgetPlanner::State {
  std::mutex mutex;
  int64_t budget;
  ReplayCostModel model;
  bool planned = false;
  std::vector<RegionGraph> recorded;  // in region exit order
  // (region, node index, output) -> keep
  std::map<std::tuple<std::string, int64_t, uint32_t>, bool> plan;
  Summary summary;
};

BudgetPlanner::BudgetPlanner(int64_t budget_bytes, ReplayCostModel model)
    : state_(std::make_shared<State>()) {
  REPRISE_CHECK(budget_bytes >= 0, "BudgetPlanner: negative budget ", budget_bytes);
  REPRISE_CHECK(model.flops_per_byte >= 0 && std::isfinite(model.flops_per_byte),
                "BudgetPlanner: flops_per_byte must be finite and >= 0, got ",
                model.flops_per_byte);
  state_->budget = budget_bytes;
  state_->model = model;
}

Policy BudgetPlanner::policy() {
  std::shared_ptr<State> s = state_;
  Policy p("budget(" + std::to_string(s->budget) + ")",
           [s](const ValueInfo& v) -> std::optional<Decision> {
             std::lock_guard lock(s->mutex);
             // The recording step holds the least it can, like policies::full(),
             // so that a run the plan fits in fits from its first step.
             if (!s->planned) return Decision::prefer_recompute;
             auto it = s->plan.find({v.region, v.node_index, v.output});
             bool keep = it != s->plan.end() && it->second;
             return keep ? Decision::prefer_save : Decision::prefer_recompute;
           });
  p.on_region([s](const RegionGraph& g) {
    std::lock_guard lock(s->mutex);
    if (!s->planned) {
      s->recorded.push_back(g);
      s->recorded.back().model = s->model;
    }
  });
  return p;
}

void BudgetPlanner::plan() {
  std::lock_guard lock(state_->mutex);
  State& s = *state_;
  REPRISE_CHECK(!s.recorded.empty(), "BudgetPlanner::plan: no region was recorded; run one step ",
                "with planner.policy() first");
  // Each frontier also holds the region's plan at a share of the budget in
  // proportion to what it holds with everything kept, so that the choice is
  // never worse than planning the regions apart on such shares.
  std::vector<int64_t> full_bytes;
  int64_t total = 0;
  for (const RegionGraph& g : s.recorded) {
    full_bytes.push_back(g.evaluate(std::vector<bool>(g.values.size(), true)).bytes);
    total += full_bytes.back();
  }
  std::map<std::string, std::vector<RegionPlan>> by_shape;
  std::vector<std::vector<RegionPlan>> frontiers;
  std::vector<size_t> at_share;  // each region's best plan within its share
  double share_cost = 0;
  int64_t share_bytes = 0;
  for (size_t r = 0; r < s.recorded.size(); ++r) {
    const RegionGraph& g = s.recorded[r];
    const int64_t share =
        total > 0 ? int64_t(double(s.budget) * double(full_bytes[r]) / double(total)) : 0;
    auto [it, added] = by_shape.try_emplace(shape_of(g) + ";" + std::to_string(share));
    if (added) it->second = region_frontier(g, {share});
    frontiers.push_back(it->second);
    size_t best = 0;
    while (best + 1 < frontiers[r].size() && frontiers[r][best + 1].cost.bytes <= share) ++best;
    at_share.push_back(best);
    share_cost += frontiers[r][best].cost.cost;
    share_bytes += frontiers[r][best].cost.bytes;
  }
  std::vector<size_t> chosen = choose_plans(frontiers, s.budget);
  double chosen_cost = 0;
  for (size_t r = 0; r < chosen.size(); ++r) chosen_cost += frontiers[r][chosen[r]].cost.cost;
  // Plans within the shares fit too: take them if choose_plans' rounding
  // missed them.
  if (share_bytes <= s.budget && share_cost < chosen_cost) {
    chosen = at_share;
  }

  s.summary = {};
  s.summary.budget = s.budget;
  for (size_t r = 0; r < s.recorded.size(); ++r) {
    const RegionGraph& g = s.recorded[r];
    const RegionPlan& p = frontiers[r][chosen[r]];
    const RegionGraph::Cost full = g.evaluate(std::vector<bool>(g.values.size(), false));
    s.summary.planned_bytes += p.cost.bytes;
    s.summary.replay_flops += p.cost.flops;
    s.summary.replay_cost += p.cost.cost;
    s.summary.full_replay_flops += full.flops;
    s.summary.full_replay_cost += full.cost;
    for (size_t v = 0; v < g.values.size(); ++v) {
      s.plan[{g.region, g.values[v].node, g.values[v].output}] = p.keep[v];
      s.summary.values_kept += p.keep[v] ? 1 : 0;
    }
    s.summary.values += int64_t(g.values.size());
  }
  s.planned = true;
}

bool BudgetPlanner::planned() const {
  std::lock_guard lock(state_->mutex);
  return state_->planned;
}

BudgetPlanner::Summary BudgetPlanner::summary() const {
  std::lock_guard lock(state_->mutex);
  return state_->summary;
}

}  // namespace reprise::autograd
