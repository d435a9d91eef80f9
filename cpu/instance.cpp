// This level's CpuBackend.
#include "cpu/backend.h"

REPRISE_CPU_BEGIN

CpuCapability CpuBackend::capability() const {
#if defined(REPRISE_CPU_LEVEL_AVX512)
  // One build serves both: avx512_bf16 only changes its bf16 products.
  return cpu_capability() == CpuCapability::avx512_bf16 ? CpuCapability::avx512_bf16
                                                        : CpuCapability::avx512;
#elif defined(REPRISE_CPU_LEVEL_AVX2)
  return CpuCapability::avx2;
#else
  return CpuCapability::scalar;
#endif
}

// Never destroyed: storage that outlives static destruction still frees
// through it.
Backend& instance() {
  static CpuBackend* backend = new CpuBackend;
  return *backend;
}

REPRISE_CPU_END
