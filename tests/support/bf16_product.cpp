#include "tests/support/bf16_product.h"

#include <cmath>
#include <vector>

#include "base/error.h"
#include "engine/shape.h"
#include "ops/cast.h"
#include "tests/cases/inputs.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace reprise::testing {
namespace {

// One output's f32 sum over a row a and a column b of K values. Never
// inlined, so that its arithmetic stays inside the caller's FlushDenormals.
__attribute__((noinline, noipa)) float paired_chain(const float* a, const float* b, int64_t K) {
  float acc = 0;
  for (int64_t k = 0; k < K; k += 2) {
    acc = k + 1 < K ? std::fma(a[k + 1], b[k + 1], acc) : std::fma(0.0f, 0.0f, acc);
    acc = std::fma(a[k], b[k], acc);
  }
  return acc;
}

}  // namespace

#if defined(__x86_64__)
FlushDenormals::FlushDenormals() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | (1u << 6) | (1u << 15));  // DAZ, FTZ
}
FlushDenormals::~FlushDenormals() { _mm_setcsr(saved_); }
#else
FlushDenormals::FlushDenormals() { REPRISE_FAIL("FlushDenormals: x86-64 only"); }
FlushDenormals::~FlushDenormals() = default;
#endif

Tensor bf16_reference_product(const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.dtype() == DType::bf16 && b.dtype() == DType::bf16,
                "bf16_reference_product: expected bf16 operands, got ", a.describe(), " and ",
                b.describe());
  const ProductShapes shapes = product_shapes(a.shape(), b.shape());
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1), batch = numel(shapes.batch);
  Shape sa = shapes.batch, sb = shapes.batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {N, K});
  NoGradGuard no_grad;
  const std::vector<float> va = a.expand(sa).to(DType::f32).contiguous().to_vector<float>();
  const std::vector<float> vb =
      b.transpose(-1, -2).expand(sb).to(DType::f32).contiguous().to_vector<float>();
  std::vector<float> c(size_t(batch * M * N));
  {
    const FlushDenormals flush;
    for (int64_t m = 0; m < batch; ++m) {
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          c[size_t((m * M + i) * N + j)] =
              paired_chain(&va[size_t((m * M + i) * K)], &vb[size_t((m * N + j) * K)], K);
        }
      }
    }
  }
  return Tensor::from_vector(c, shapes.out).to(DType::bf16);
}

Tensor random16(const Shape& shape, DType dtype, uint64_t seed) {
  return ops::cast(uniform(shape, -2, 2, seed, DType::f32), dtype);
}

}  // namespace reprise::testing
