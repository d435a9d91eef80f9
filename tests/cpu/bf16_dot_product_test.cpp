// What the CPU's bf16 dot-product instruction computes, confirmed on the
// machine: AVX512-BF16's vdpbf16ps adds, per f32 lane j, the products of
// the bf16 pairs (2j, 2j + 1) to the accumulator as two steps, the odd
// element's product first, each rounded to nearest even, with denormal
// inputs and results flushed to zero (Intel's pseudo-code; AMD Zen 4 does
// the same). A bf16 product is exact in f32, so each step is one fused
// multiply-add: that order is what an emulation on any other CPU must
// follow to give the same bits. Skipped where the CPU lacks AVX512-BF16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace reprise::testing {
namespace {

float bf16_value(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

float flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

// One lane of vdpbf16ps, emulated: acc + a1 b1, then + a0 b0, each step a
// rounded FMA, denormals flushed on the way in and out.
float dot_pair(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1) {
  const auto in = [](uint16_t h) { return flush(bf16_value(h)); };
  const float odd = flush(std::fma(in(a1), in(b1), flush(acc)));
  return flush(std::fma(in(a0), in(b0), odd));
}

#if defined(__x86_64__)
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
      const float unflushed =
          std::fma(bf16_value(a[2 * j]), bf16_value(b[2 * j]),
                   std::fma(bf16_value(a[2 * j + 1]), bf16_value(b[2 * j + 1]), acc[j]));
      flushed += std::bit_cast<uint32_t>(unflushed) != std::bit_cast<uint32_t>(want);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(want))
          << "lane " << j << " of round " << round;
    }
  }
  EXPECT_GT(flushed, 1000);
#else
  GTEST_SKIP() << "not an x86-64 CPU";
#endif
}

}  // namespace
}  // namespace reprise::testing
