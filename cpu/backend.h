#pragma once
// The CPU backend: CpuBackend is built once per CPU capability, in the
// namespace of its level (cpu/level.h), from the kernel files of cpu/, on
// top of the level-independent CpuBackendBase (cpu/backend_base.h).
// cpu/select.cpp hands out the build for cpu_capability().

#include "cpu/backend_base.h"
#include "cpu/level.h"

REPRISE_CPU_BEGIN

class CpuBackend final : public CpuBackendBase {
 public:
  CpuCapability capability() const override;
  // Every kernel (engine/kernels/all.def: rows of declarations, no code,
  // so nothing of the standard library comes under the level's ISA).
#define REPRISE_KERNEL(Ret, name, params, args) Ret name params override;
#define REPRISE_OWN_KERNEL REPRISE_KERNEL
#include "engine/kernels/all.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL
};

// This level's backend.
Backend& instance();

REPRISE_CPU_END
