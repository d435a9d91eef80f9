#include "autograd/op_registry.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "base/error.h"

namespace reprise::autograd {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<const OpInfo*> ops;
};

Registry& registry() {
  static Registry r;
  return r;
}

// Levenshtein distance, for suggestions.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

void register_op(const OpInfo& op) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (const OpInfo* known : r.ops) {
    if (known == &op) return;
    REPRISE_CHECK(std::string_view(known->name) != op.name, "register_op: an op named '", op.name,
                  "' is already registered");
  }
  r.ops.push_back(&op);
}

const OpInfo* find_op(std::string_view name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (const OpInfo* op : r.ops) {
    if (name == op->name) return op;
  }
  return nullptr;
}

const OpInfo& op_named(std::string_view name, std::string_view who) {
  if (const OpInfo* op = find_op(name)) return *op;
  std::vector<const OpInfo*> ops = registered_ops();
  std::stable_sort(ops.begin(), ops.end(), [&](const OpInfo* a, const OpInfo* b) {
    return edit_distance(name, a->name) < edit_distance(name, b->name);
  });
  std::string close;
  for (size_t i = 0; i < std::min<size_t>(3, ops.size()); ++i) {
    close += std::string(i ? ", " : "") + ops[i]->name;
  }
  REPRISE_FAIL(who, ": no op is named '", name, "'",
               ops.empty() ? std::string(" (no ops are registered)") : "; closest: " + close);
}

std::vector<const OpInfo*> registered_ops() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  return r.ops;
}

}  // namespace reprise::autograd
