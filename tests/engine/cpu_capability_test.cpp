// CPU capabilities: what is supported, selecting one, and clear errors for
// one that does not exist or that this CPU lacks.
#include "engine/cpu_capability.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backend.h"
#include "tests/support/capabilities.h"
#include "tests/support/expect_error.h"

namespace reprise {
namespace {

TEST(CpuCapability, ScalarIsAlwaysSupportedAndTheListIsOrdered) {
  const std::vector<CpuCapability>& s = supported_cpu_capabilities();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front(), CpuCapability::scalar);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
}

TEST(CpuCapability, EachSupportedOneDrivesTheCpuBackend) {
  testing::for_each_capability([](CpuCapability c) {
    EXPECT_EQ(cpu_capability(), c);
    EXPECT_EQ(backend(Device::cpu()).name(), std::string("cpu (") + to_string(c) + ")");
  });
}

TEST(CpuCapability, NamesParseAndUnknownOnesAreErrors) {
  for (CpuCapability c : {CpuCapability::scalar, CpuCapability::avx2, CpuCapability::avx512,
                          CpuCapability::avx512_bf16}) {
    EXPECT_EQ(parse_cpu_capability(to_string(c), "test"), c);
  }
  testing::expect_error(
      [] { parse_cpu_capability("avx1024", "REPRISE_CPU_CAPABILITY"); },
      {"REPRISE_CPU_CAPABILITY", "avx1024", "scalar, avx2, avx512 or avx512_bf16"});
}

TEST(CpuCapability, OneThisCpuLacksIsAnErrorNamingIt) {
  const std::vector<CpuCapability>& s = supported_cpu_capabilities();
  if (s.back() == CpuCapability::avx512_bf16) GTEST_SKIP() << "this CPU has every capability";
  const CpuCapability missing = CpuCapability(int(s.back()) + 1);
  testing::expect_error([&] { set_cpu_capability(missing); },
                        {"does not support", to_string(missing), "supported here"});
}

}  // namespace
}  // namespace reprise
