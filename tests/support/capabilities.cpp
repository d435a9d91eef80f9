#include "tests/support/capabilities.h"

namespace reprise::testing {

void for_each_capability(const std::function<void(CpuCapability)>& body) {
  struct Restore {
    CpuCapability saved = cpu_capability();
    ~Restore() { set_cpu_capability(saved); }
  } restore;
  for (CpuCapability c : supported_cpu_capabilities()) {
    set_cpu_capability(c);
    body(c);
  }
}

}  // namespace reprise::testing
