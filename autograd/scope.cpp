#include "autograd/scope.h"

namespace reprise::autograd {
namespace {
std::shared_ptr<const std::string>& scope_slot() {
  thread_local std::shared_ptr<const std::string> path = std::make_shared<const std::string>();
  return path;
}
}  // namespace

Scope::Scope(std::string_view name) : previous_(scope_slot()) {
  if (name.empty()) return;  // a nameless scope (a root module) adds nothing
  std::string path = previous_->empty() ? std::string(name) : *previous_ + "." + std::string(name);
  scope_slot() = std::make_shared<const std::string>(std::move(path));
}

Scope::~Scope() { scope_slot() = std::move(previous_); }

const std::shared_ptr<const std::string>& current_scope() { return scope_slot(); }

}  // namespace reprise::autograd
