#include "engine/cpu_capability.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "base/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace reprise {
namespace {

constexpr CpuCapability kAll[] = {CpuCapability::scalar, CpuCapability::avx2, CpuCapability::avx512,
                                  CpuCapability::avx512_bf16};

#if defined(__x86_64__)
// The CPUID feature bits (Intel SDM vol. 2A, CPUID) and the register state
// the OS saves (XGETBV's XCR0): a capability needs both. Read directly
// rather than through __builtin_cpu_supports, whose feature names differ
// between compilers (Clang 14 knows neither "f16c" nor "bmi2").
struct X86Features {
  bool avx2 = false, avx512 = false, avx512_bf16 = false;
};

X86Features read_x86_features() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return {};
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), f16c = ecx & (1u << 29);
  if (!osxsave) return {};
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_avx = (xcr0_lo & 0x6u) == 0x6u;       // SSE and AVX state
  const bool os_avx512 = (xcr0_lo & 0xe6u) == 0xe6u;  // and opmask, ZMM state
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return {};
  const bool avx2 = ebx & (1u << 5), bmi2 = ebx & (1u << 8);
  const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17);
  const bool avx512bw = ebx & (1u << 30), avx512vl = ebx & (1u << 31);
  X86Features f;
  f.avx2 = os_avx && avx2 && fma && f16c && bmi2;
  f.avx512 = f.avx2 && os_avx512 && avx512f && avx512dq && avx512bw && avx512vl;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return f;
  f.avx512_bf16 = f.avx512 && (eax & (1u << 5));
  return f;
}
#endif

bool cpu_has(CpuCapability c) {
  switch (c) {
    case CpuCapability::scalar:
      return true;
#if defined(__x86_64__)
    case CpuCapability::avx2:
      return read_x86_features().avx2;
    case CpuCapability::avx512:
      return read_x86_features().avx512;
    case CpuCapability::avx512_bf16:
      return read_x86_features().avx512_bf16;
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
  REPRISE_CHECK(cpu_build_carries(c), who, ": this build does not carry the ", to_string(c),
                " capability (configured with REPRISE_CPU_LEVELS without it; carried and "
                "supported here: ",
                supported_names(), ")");
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
    case CpuCapability::avx512_bf16:
      return "avx512_bf16";
  }
  return "?";
}

const std::vector<CpuCapability>& supported_cpu_capabilities() {
  static const std::vector<CpuCapability> supported = [] {
    std::vector<CpuCapability> v;
    for (CpuCapability c : kAll) {
      if (cpu_has(c) && cpu_build_carries(c)) v.push_back(c);
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
  for (CpuCapability c : kAll) {
    if (name == to_string(c)) return c;
  }
  REPRISE_FAIL(who, ": unknown CPU capability '", name,
               "'; expected scalar, avx2, avx512 or avx512_bf16");
}

}  // namespace reprise
