#include "engine/cpu_capability.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace reprise {
namespace {

// GCC's and Clang's __builtin_cpu_supports check the OS saves the vector
// registers too (XGETBV), not only the CPUID bits.
bool cpu_has(CpuCapability c) {
  switch (c) {
    case CpuCapability::scalar:
      return true;
#if defined(__x86_64__)
    case CpuCapability::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
    case CpuCapability::avx512:
      return cpu_has(CpuCapability::avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
    default:
      return false;
  }
}

std::string supported_names() {
  std::string s;
  for (CpuCapability c : supported_cpu_capabilities())
    s += std::string(s.empty() ? "" : ", ") + to_string(c);
  return s;
}

void check_supported(CpuCapability c, std::string_view who) {
  REPRISE_CHECK(cpu_has(c), who, ": this CPU does not support the ", to_string(c),
                " capability (supported here: ", supported_names(), ")");
}

CpuCapability initial_capability() {
  const char* env = std::getenv("REPRISE_CPU_CAPABILITY");
  if (env == nullptr || *env == '\0') return supported_cpu_capabilities().back();
  const CpuCapability c = parse_cpu_capability(env, "REPRISE_CPU_CAPABILITY");
  check_supported(c, "REPRISE_CPU_CAPABILITY");
  return c;
}

// -1 until the first use reads the environment.
std::atomic<int> selected{-1};

}  // namespace

const char* to_string(CpuCapability c) {
  switch (c) {
    case CpuCapability::scalar:
      return "scalar";
    case CpuCapability::avx2:
      return "avx2";
    case CpuCapability::avx512:
      return "avx512";
  }
  return "?";
}

const std::vector<CpuCapability>& supported_cpu_capabilities() {
  static const std::vector<CpuCapability> supported = [] {
    std::vector<CpuCapability> v;
    for (CpuCapability c : {CpuCapability::scalar, CpuCapability::avx2, CpuCapability::avx512}) {
      if (cpu_has(c)) v.push_back(c);
    }
    return v;
  }();
  return supported;
}

CpuCapability cpu_capability() {
  int c = selected.load(std::memory_order_relaxed);
  if (c < 0) {
    // A bad REPRISE_CPU_CAPABILITY raises here, and again at every use.
    c = int(initial_capability());
    int expected = -1;
    if (!selected.compare_exchange_strong(expected, c)) c = expected;
  }
  return CpuCapability(c);
}

void set_cpu_capability(CpuCapability c) {
  check_supported(c, "set_cpu_capability");
  selected.store(int(c), std::memory_order_relaxed);
}

CpuCapability parse_cpu_capability(std::string_view name, std::string_view who) {
  for (CpuCapability c : {CpuCapability::scalar, CpuCapability::avx2, CpuCapability::avx512}) {
    if (name == to_string(c)) return c;
  }
  REPRISE_FAIL(who, ": unknown CPU capability '", name, "'; expected scalar, avx2 or avx512");
}

}  // namespace reprise
