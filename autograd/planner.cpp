#include "autograd/planner.h"

#include <algorithm>
#include <mutex>

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
  Cost c{input_bytes, 0.0};
  for (size_t v = 0; v < values.size(); ++v) {
    if (keep[v] && (values[v].read_by_backward || held[v])) c.bytes += values[v].bytes;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (replayed[n]) c.flops += nodes[n].flops;
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
  return a.flops < b.flops || (a.flops == b.flops && a.bytes < b.bytes);
}

}  // namespace

std::vector<bool> plan_exhaustive(const RegionGraph& g, int64_t budget) {
  std::vector<int32_t> cand = candidates(g);
  REPRISE_CHECK(cand.size() <= 24, "plan_exhaustive: ", cand.size(),
                " candidate values is too many for exhaustive search");
  std::vector<bool> best(g.values.size(), false), keep(g.values.size(), false);
  RegionGraph::Cost best_cost = g.evaluate(best);
  for (uint64_t mask = 1; mask < (uint64_t(1) << cand.size()); ++mask) {
    for (size_t i = 0; i < cand.size(); ++i) keep[size_t(cand[i])] = (mask >> i) & 1;
    RegionGraph::Cost c = g.evaluate(keep);
    if (c.bytes <= budget && better(c, best_cost)) {
      best_cost = c;
      best = keep;
    }
  }
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
// most flops per byte added while the budget holds.
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
      double saved = cur.flops - c.flops;
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

// ---- BudgetPlanner ------------------------------------------------------------

struct BudgetPlanner::State {
  std::mutex mutex;
  int64_t budget;
  bool planned = false;
  std::vector<RegionGraph> recorded;  // in region exit order
  // (region, node index, output) -> keep
  std::map<std::tuple<std::string, int64_t, uint32_t>, bool> plan;
  Summary summary;
};

BudgetPlanner::BudgetPlanner(int64_t budget_bytes) : state_(std::make_shared<State>()) {
  REPRISE_CHECK(budget_bytes >= 0, "BudgetPlanner: negative budget ", budget_bytes);
  state_->budget = budget_bytes;
}

Policy BudgetPlanner::policy() {
  std::shared_ptr<State> s = state_;
  Policy p("budget(" + std::to_string(s->budget) + ")",
           [s](const ValueInfo& v) -> std::optional<Decision> {
             std::lock_guard lock(s->mutex);
             if (!s->planned) return Decision::prefer_save;  // the recording step
             auto it = s->plan.find({v.region, v.node_index, v.output});
             bool keep = it != s->plan.end() && it->second;
             return keep ? Decision::prefer_save : Decision::prefer_recompute;
           });
  p.on_region([s](const RegionGraph& g) {
    std::lock_guard lock(s->mutex);
    if (!s->planned) s->recorded.push_back(g);
  });
  return p;
}

void BudgetPlanner::plan() {
  std::lock_guard lock(state_->mutex);
  State& s = *state_;
  REPRISE_CHECK(!s.recorded.empty(), "BudgetPlanner::plan: no region was recorded; run one step ",
                "with planner.policy() first");
  // Each region gets a share of the budget in proportion to what it would
  // hold with everything kept (identical blocks get equal shares).
  std::vector<int64_t> full_bytes;
  int64_t total = 0;
  for (const RegionGraph& g : s.recorded) {
    full_bytes.push_back(g.evaluate(std::vector<bool>(g.values.size(), true)).bytes);
    total += full_bytes.back();
  }
  s.summary = {};
  s.summary.budget = s.budget;
  for (size_t r = 0; r < s.recorded.size(); ++r) {
    const RegionGraph& g = s.recorded[r];
    int64_t share =
        total > 0 ? int64_t(double(s.budget) * double(full_bytes[r]) / double(total)) : 0;
    std::vector<bool> keep = plan_region(g, share);
    RegionGraph::Cost c = g.evaluate(keep);
    s.summary.planned_bytes += c.bytes;
    s.summary.replay_flops += c.flops;
    s.summary.full_replay_flops += g.evaluate(std::vector<bool>(g.values.size(), false)).flops;
    for (size_t v = 0; v < g.values.size(); ++v) {
      s.plan[{g.region, g.values[v].node, g.values[v].output}] = keep[v];
      s.summary.values_kept += keep[v] ? 1 : 0;
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
