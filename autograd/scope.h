#pragma once
// Scope names the nodes recorded while it is alive: nested scopes join with
// dots, so a node recorded inside Scope("layers") and Scope("3") and
// Scope("attn") carries the path "layers.3.attn". The nn Module tree opens
// one Scope per module, so scopes are parameter-name prefixes; an empty
// name (a root module's) adds no component.

#include <memory>
#include <string>
#include <string_view>

namespace reprise::autograd {

class Scope {
 public:
  explicit Scope(std::string_view name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  std::shared_ptr<const std::string> previous_;
};

// The current thread's scope path ("" at top level). Shared so that every
// node recorded in one scope points at one string.
const std::shared_ptr<const std::string>& current_scope();

}  // namespace reprise::autograd
