#pragma once
// REPRISE_HD marks functions that compile both as host code (g++) and as
// CUDA device code (nvcc), so that one definition of an op's math serves
// the CPU loops and the CUDA kernels.

#if defined(__CUDACC__)
#define REPRISE_HD __host__ __device__ __forceinline__
#else
#define REPRISE_HD inline
#endif
