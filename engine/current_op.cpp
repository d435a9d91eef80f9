#include "engine/current_op.h"

namespace reprise {
namespace {
thread_local const CurrentOpGuard* t_current = nullptr;
}  // namespace

CurrentOpGuard::CurrentOpGuard(const char* name, const char* phase, const std::string& scope)
    : name_(name), phase_(phase), scope_(scope), outer_(t_current) {
  t_current = this;
}

CurrentOpGuard::~CurrentOpGuard() { t_current = outer_; }

std::string describe_current_op() {
  if (t_current == nullptr) return "no op (outside autograd, or on a worker thread)";
  std::string out;
  for (const CurrentOpGuard* op = t_current; op != nullptr; op = op->outer_) {
    if (op != t_current) out += ", in ";
    out += std::string(op->name_) + " (" + op->phase_ + ")";
    if (!op->scope_.empty()) out += " at " + op->scope_;
  }
  return out;
}

}  // namespace reprise
