#include "autograd/policy.h"

#include <algorithm>

#include "autograd/op_registry.h"

namespace reprise::autograd {

const char* decision_name(Decision d) {
  switch (d) {
    case Decision::must_save:
      return "MUST_SAVE";
    case Decision::prefer_save:
      return "PREFER_SAVE";
    case Decision::prefer_recompute:
      return "PREFER_RECOMPUTE";
    case Decision::must_recompute:
      return "MUST_RECOMPUTE";
  }
  return "unknown";
}

std::optional<Decision> resolve(const std::vector<std::optional<Decision>>& innermost_first) {
  std::optional<Decision> prefer;
  for (const auto& d : innermost_first) {
    if (!d) continue;
    if (is_must(*d)) return d;
    if (!prefer) prefer = d;
  }
  return prefer;
}

bool glob_match(std::string_view p, std::string_view t) {
  // Iterative matcher with single-star backtracking: O(|p| |t|) worst case.
  size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

namespace policies {

Policy full() {
  return Policy("full", [](const ValueInfo&) { return Decision::prefer_recompute; });
}

Policy save_all() {
  return Policy("save_all", [](const ValueInfo&) { return Decision::prefer_save; });
}

Policy save_ops(std::vector<std::string> ops) {
  for (const std::string& op : ops) op_named(op, "policies::save_ops");
  std::string name = "save_ops(";
  for (size_t i = 0; i < ops.size(); ++i) name += (i ? "," : "") + ops[i];
  return Policy(name + ")", [ops](const ValueInfo& v) {
    bool listed = std::find(ops.begin(), ops.end(), v.op) != ops.end();
    return listed ? Decision::prefer_save : Decision::prefer_recompute;
  });
}

Policy save_every_nth(std::string op, int n) {
  REPRISE_CHECK(n >= 1, "policies::save_every_nth: n must be >= 1, got ", n);
  op_named(op, "policies::save_every_nth");
  return Policy("save_every_nth(" + op + "," + std::to_string(n) + ")",
                [op, n](const ValueInfo& v) -> std::optional<Decision> {
                  if (v.op != op) return std::nullopt;
                  return v.op_ordinal % n == 0 ? Decision::prefer_save : Decision::prefer_recompute;
                });
}

Policy op_sac(std::vector<std::string> ops, std::string matmul_op) {
  Policy every_other = save_every_nth(matmul_op, 2);
  Policy listed = save_ops(std::move(ops));
  return Policy("op_sac", [every_other, listed](const ValueInfo& v) {
    std::optional<Decision> d = every_other(v);
    return d ? d : listed(v);
  });
}

Policy save_scopes(std::string glob) {
  return Policy("save_scopes(" + glob + ")", [glob](const ValueInfo& v) -> std::optional<Decision> {
    if (glob_match(glob, v.scope)) return Decision::must_save;
    return std::nullopt;
  });
}

Policy recompute_scopes(std::string glob) {
  return Policy("recompute_scopes(" + glob + ")",
                [glob](const ValueInfo& v) -> std::optional<Decision> {
                  if (glob_match(glob, v.scope)) return Decision::must_recompute;
                  return std::nullopt;
                });
}

Policy recompute_auxiliary(std::string op) {
  op_named(op, "policies::recompute_auxiliary");
  return Policy("recompute_auxiliary(" + op + ")",
                [op](const ValueInfo& v) -> std::optional<Decision> {
                  if (v.auxiliary && v.op == op) return Decision::must_recompute;
                  return std::nullopt;
                });
}

Policy predicate(std::string name, Policy::Fn fn) { return Policy(std::move(name), std::move(fn)); }

Policy combine(std::vector<Policy> parts) {
  std::string name = "combine(";
  for (size_t i = 0; i < parts.size(); ++i) name += (i ? "," : "") + parts[i].name();
  return Policy(name + ")", [parts](const ValueInfo& v) {
    std::vector<std::optional<Decision>> ds;
    for (const Policy& p : parts) ds.push_back(p(v));
    return resolve(ds);
  });
}

}  // namespace policies
}  // namespace reprise::autograd
