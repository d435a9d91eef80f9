#pragma once
// CPU capabilities: the instruction-set levels the CPU backend (cpu/) is
// built for, one build of its kernels each (avx512_bf16 shares avx512's),
// and the one it runs.
//
//   scalar  any CPU (plain C++; on x86-64 the compiler may use SSE2)
//   avx2    x86-64 with AVX2, FMA, F16C and BMI2 (Haswell, Zen 1 and later)
//   avx512  x86-64 with AVX-512 F, BW, DQ and VL (Skylake-X, Zen 4 and later)
//   avx512_bf16  avx512 and AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4
//           and later): the avx512 kernels, with bf16 products on the
//           dot-product instruction (vdpbf16ps) instead of its emulation
//
// Every kernel computes each result as one fixed sequence of roundings, so
// the capability changes the speed, never the bits (tests/ops/backends_test.cpp;
// for bf16 products, the sequence vdpbf16ps computes: cpu/gemm_bf16.cpp).
//
// The CPU backend runs the best capability this CPU supports, or the one
// the environment variable REPRISE_CPU_CAPABILITY names (scalar, avx2,
// avx512 or avx512_bf16; read at first use), which may only lower it.

#include <cstdint>
#include <string_view>
#include <vector>

namespace reprise {

enum class CpuCapability : uint8_t { scalar, avx2, avx512, avx512_bf16 };

const char* to_string(CpuCapability c);

// Whether this build carries the kernels of capability c (CMake's
// REPRISE_CPU_LEVELS; every level of the architecture by default).
bool cpu_build_carries(CpuCapability c);

// The capabilities this build carries and this CPU (and its OS) supports,
// lowest first; scalar is always there.
const std::vector<CpuCapability>& supported_cpu_capabilities();

// The capability the CPU backend runs. Raises an Error when
// REPRISE_CPU_CAPABILITY names an unknown capability or one this CPU lacks.
CpuCapability cpu_capability();

// Selects the capability for later kernels (tests and benchmarks compare
// them in one process). Raises an Error when it is not supported.
void set_cpu_capability(CpuCapability c);

// "scalar", "avx2", "avx512", "avx512_bf16" -> the capability; an Error naming `who` and
// the valid names otherwise.
CpuCapability parse_cpu_capability(std::string_view name, std::string_view who);

}  // namespace reprise
