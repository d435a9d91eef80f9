// cpu_backend(): the build of the CPU backend for cpu_capability().
#include "engine/backend.h"
#include "engine/cpu_capability.h"

namespace reprise {
namespace cpu {
namespace scalar {
Backend& instance();
}
#if defined(REPRISE_CPU_X86_LEVELS)
namespace avx2 {
Backend& instance();
}
namespace avx512 {
Backend& instance();
}
#endif
}  // namespace cpu

Backend& cpu_backend() {
  switch (cpu_capability()) {
#if defined(REPRISE_CPU_X86_LEVELS)
    case CpuCapability::avx512:
    case CpuCapability::avx512_bf16:  // the avx512 build; its bf16 products ask which
      return cpu::avx512::instance();
    case CpuCapability::avx2:
      return cpu::avx2::instance();
#endif
    default:
      return cpu::scalar::instance();
  }
}

}  // namespace reprise
