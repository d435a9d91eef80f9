// What the CPU's bf16 dot-product instruction computes, confirmed on the
// machine: AVX512-BF16's vdpbf16ps adds, per f32 lane j, the products of
// the bf16 pairs (2j, 2j + 1) to the accumulator as two steps, the odd
// element's product first, each rounded to nearest even, with denormal
// inputs read as zero and tiny results flushed to zero (Intel's
// pseudo-code; on AMD Zen 4 a result tiny before rounding is flushed). A bf16 product is
// exact in f32, so each step is one fused multiply-add under the FPU's
// denormals-are-zero and flush-to-zero modes, which flush the same way:
// that is the emulation cpu/gemm_bf16.cpp runs on every other CPU.
// Skipped where the CPU lacks AVX512-BF16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "tests/support/bf16_product.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace reprise::testing {
namespace {

float bf16_value(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

#if defined(__x86_64__)
// acc + a1 b1, then + a0 b0, each step a hardware FMA. Never inlined, so
// that its arithmetic stays inside the caller's FlushDenormals.
__attribute__((target("fma"), noinline, noipa)) float fma_pair(float acc, uint16_t a0, uint16_t a1,
                                                               uint16_t b0, uint16_t b1) {
  const __m128 odd =
      _mm_fmadd_ss(_mm_set_ss(bf16_value(a1)), _mm_set_ss(bf16_value(b1)), _mm_set_ss(acc));
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(bf16_value(a0)), _mm_set_ss(bf16_value(b0)), odd));
}

// One lane of vdpbf16ps, emulated.
float dot_pair(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1) {
  const FlushDenormals flush;
  return fma_pair(acc, a0, a1, b0, b1);
}

__attribute__((target("avx512f,avx512bf16"))) void dpbf16(const float* acc, const uint16_t* a,
                                                          const uint16_t* b, float* out) {
  const __m512bh va = (__m512bh)_mm512_loadu_si512(a), vb = (__m512bh)_mm512_loadu_si512(b);
  _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), va, vb));
}
#endif

TEST(Bf16DotProduct, TheInstructionAddsTheOddProductFirstWithDenormalsFlushed) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1);
  const auto bf16_of = [](float f) { return uint16_t(std::bit_cast<uint32_t>(f) >> 16); };
  int64_t flushed = 0;  // lanes where the flushes changed the result
  for (int round = 0; round < 20000; ++round) {
    // Every third round spreads a's exponents over 2^-30 .. 2^30, every
    // fifth makes b denormal, every seventh starts from a denormal
    // accumulator, so that cancellations, roundings and flushes all occur.
    uint16_t a[32], b[32];
    float acc[16], got[16];
    for (int i = 0; i < 32; ++i) {
      const float x = round % 3 == 0 ? std::ldexp(normal(rng), int(rng() % 61) - 30) : normal(rng);
      a[i] = bf16_of(x);
      b[i] = bf16_of(normal(rng) * (round % 5 == 0 ? 1e-39f : 1.0f));
    }
    for (float& v : acc) v = normal(rng) * (round % 7 == 0 ? 1e-39f : float(1 << (rng() % 20)));
    dpbf16(acc, a, b, got);
    for (int j = 0; j < 16; ++j) {
      const float want = dot_pair(acc[j], a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1]);
      const float unflushed = fma_pair(acc[j], a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1]);
      flushed += std::bit_cast<uint32_t>(unflushed) != std::bit_cast<uint32_t>(want);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(want))
          << "lane " << j << " of round " << round;
    }
  }
  EXPECT_GT(flushed, 1000);

  // A sum just below the smallest normal, 2^-126 - 2^-150, which rounds to
  // it: the instruction flushes it as the FMA under flush-to-zero does (on
  // Zen 4 both to zero: tiny before rounding).
  const float tiny = std::ldexp(1.0f, -75), smallest = std::ldexp(1.0f, -126);
  float acc[16] = {smallest}, got[16];
  uint16_t a[32] = {0, bf16_of(tiny)}, b[32] = {0, bf16_of(-tiny)};
  dpbf16(acc, a, b, got);
  EXPECT_EQ(std::bit_cast<uint32_t>(got[0]),
            std::bit_cast<uint32_t>(dot_pair(smallest, 0, a[1], 0, b[1])));
#else
  GTEST_SKIP() << "not an x86-64 CPU";
#endif
}

}  // namespace
}  // namespace reprise::testing
