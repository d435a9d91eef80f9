#include "tests/cases/op_case.h"

namespace reprise::testing {

std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

std::string op_of(const OpCase& c) { return c.name.substr(0, c.name.find('/')); }

RegisterOpCases::RegisterOpCases(std::vector<OpCase> cases) {
  for (OpCase& c : cases) op_cases().push_back(std::move(c));
}

}  // namespace reprise::testing
