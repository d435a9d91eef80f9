#pragma once
// The bf16 product's definition (cpu/gemm_bf16.cpp), computed plainly, one
// output at a time, for tests to hold the kernels to: per pair of k, the
// odd product then the even one, each an FMA under the FPU's
// denormals-are-zero and flush-to-zero modes, the f32 sum rounded once to
// bf16. x86-64 only (the modes are MXCSR's); elsewhere tests skip.

#include "engine/tensor.h"

namespace reprise::testing {

#if defined(__x86_64__)
inline constexpr bool kHaveBf16Reference = true;
#else
inline constexpr bool kHaveBf16Reference = false;
#endif

// The FPU's denormals-are-zero and flush-to-zero modes while it lives.
class FlushDenormals {
 public:
  FlushDenormals();
  ~FlushDenormals();
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_ = 0;
};

// a (..., M, K) @ b (..., K, N), both bf16, batch dims broadcast: the
// definition's bf16 result.
Tensor bf16_reference_product(const Tensor& a, const Tensor& b);

// Values of `dtype` (bf16 or f16) in [-2, 2): uniform f32 draws rounded to it.
Tensor random16(const Shape& shape, DType dtype, uint64_t seed);

}  // namespace reprise::testing
