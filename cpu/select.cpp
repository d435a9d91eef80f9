// cpu_backend(): the build of the CPU backend for cpu_capability(), and
// which builds this library carries (REPRISE_CPU_LEVELS, cpu/CMakeLists.txt).
#include "cpu/backend_base.h"
#include "engine/backend.h"
#include "engine/cpu_capability.h"

namespace reprise {
namespace cpu {
namespace scalar {
Backend& instance();
}
#if defined(REPRISE_CPU_CARRIES_AVX2)
namespace avx2 {
Backend& instance();
}
#endif
#if defined(REPRISE_CPU_CARRIES_AVX512)
namespace avx512 {
Backend& instance();
}
#endif

Backend& scalar_backend() { return scalar::instance(); }
}  // namespace cpu

bool cpu_build_carries(CpuCapability c) {
  switch (c) {
    case CpuCapability::scalar:
      return true;
    case CpuCapability::avx2:
#if defined(REPRISE_CPU_CARRIES_AVX2)
      return true;
#else
      return false;
#endif
    case CpuCapability::avx512:
    case CpuCapability::avx512_bf16:  // the avx512 build
#if defined(REPRISE_CPU_CARRIES_AVX512)
      return true;
#else
      return false;
#endif
  }
  return false;
}

Backend& cpu_backend() {
  // cpu_capability() is one the build carries.
  switch (cpu_capability()) {
#if defined(REPRISE_CPU_CARRIES_AVX512)
    case CpuCapability::avx512:
    case CpuCapability::avx512_bf16:  // the avx512 build; its bf16 products ask which
      return cpu::avx512::instance();
#endif
#if defined(REPRISE_CPU_CARRIES_AVX2)
    case CpuCapability::avx2:
      return cpu::avx2::instance();
#endif
    default:
      return cpu::scalar::instance();
  }
}

}  // namespace reprise
