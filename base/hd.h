#pragma once
// REPRISE_HD marks functions that compile both as host code (g++) and as
// CUDA device code (nvcc), so that one definition of an op's math serves
// the CPU loops and the CUDA kernels.

#if defined(__CUDACC__)
#define REPRISE_HD __host__ __device__ __forceinline__
#else
// Forced inline on the host too: the CPU backend compiles this math once per
// ISA level (cpu/vec.h), and a copy that is never emitted out of line is
// never shared between levels.
#define REPRISE_HD inline __attribute__((always_inline))
#endif
