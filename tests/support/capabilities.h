#pragma once
// Running a test body at every CPU capability this machine supports
// (engine/cpu_capability.h), restoring the one selected before.

#include <functional>

#include "engine/cpu_capability.h"

namespace reprise::testing {

// Calls body(c) with the CPU backend switched to each supported capability
// c, lowest first; the previous capability is back afterwards, also when
// body throws.
void for_each_capability(const std::function<void(CpuCapability)>& body);

}  // namespace reprise::testing
