#pragma once
// The ops a program can name, by name: policies (save_ops, op_sac,
// save_every_nth) and the planner name ops through it, so a misspelled or
// renamed op is an Error instead of a policy that silently matches nothing.
// reprise's own ops register themselves (ops/registry.cpp); code that
// records ops of its own registers their OpInfos too.

#include <string_view>
#include <vector>

#include "autograd/op_info.h"

namespace reprise::autograd {

// Adds `op` (which must outlive the program's use of it). Registering the
// same OpInfo twice does nothing; another OpInfo of a registered name is an
// Error.
void register_op(const OpInfo& op);

// The op of that name, or nullptr.
const OpInfo* find_op(std::string_view name);

// The op of that name; an Error naming `who` and listing the closest
// registered names otherwise.
const OpInfo& op_named(std::string_view name, std::string_view who);

// Every registered op, in registration order.
std::vector<const OpInfo*> registered_ops();

}  // namespace reprise::autograd
