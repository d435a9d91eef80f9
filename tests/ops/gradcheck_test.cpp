// Runs gradcheck over every case of the op case table (tests/cases/op_case.h):
// each op family registers its cases from its own file there.
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

class Gradcheck : public ::testing::TestWithParam<OpCase> {};

TEST_P(Gradcheck, AnalyticMatchesCentralDifferences) {
  const OpCase& c = GetParam();
  EXPECT_TRUE(gradcheck(c.fn, c.inputs(), c.options)) << c.name;
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) {
  std::string s = info.param.name;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Ops, Gradcheck, ::testing::ValuesIn(op_cases()), case_name);

}  // namespace
}  // namespace reprise::testing
