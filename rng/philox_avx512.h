#pragma once
// Internal to rng/: the AVX-512 Philox4x32-10 step that generate_words
// (words.cpp) stores and the fused dropout (fill.cpp) consumes in
// registers. Defined only where the compiler targets AVX-512 (__AVX512F__).
//
// One Philox block per 64-bit lane, each counter word in the low half of its
// own vector (c0 .. c3). _mm512_mul_epu32 reads only the low halves and
// returns the full 64-bit products, so a round is two multiplies, two shifts
// and two three-way xors: the high halves carry junk that no multiply reads
// and the final pack drops. Sets independent vectors per step hide the
// multiply latency (a round's chain is mul -> shift -> xor).

#include <cstddef>
#include <cstdint>

#include "rng/philox.h"

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which it
// then flags as maybe-uninitialized where they are inlined (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace reprise::rng::detail {

// The ten round keys, computed once per call instead of once per step.
struct RoundKeys {
  uint32_t k0[10];
  uint32_t k1[10];
  explicit RoundKeys(Key key) {
    for (int r = 0; r < 10; ++r) {
      k0[r] = key.w[0] + uint32_t(r) * kPhiloxW0;
      k1[r] = key.w[1] + uint32_t(r) * kPhiloxW1;
    }
  }
};

#if defined(__AVX512F__)
// Blocks [block, block + 8 * Sets * steps) of a subsequence, steps =
// nblocks / (8 * Sets): for each 16 consecutive words, calls
// sink(w, words) with w the index of the first (0 = word 0 of `block`) and
// words in stream order. Returns how many blocks it did.
template <int Sets, class Sink>
[[gnu::always_inline]] inline size_t philox_steps_avx512(const RoundKeys& keys,
                                                         uint64_t subsequence, uint64_t block,
                                                         size_t nblocks, const Sink& sink) {
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i m0 = _mm512_set1_epi64(kPhiloxM0), m1 = _mm512_set1_epi64(kPhiloxM1);
  const __m512i sub_lo = _mm512_set1_epi64(int64_t(uint32_t(subsequence)));
  const __m512i sub_hi = _mm512_set1_epi64(int64_t(subsequence >> 32));
  // Blocks 0..3 and 4..7 of a vector: (words 0,1) of lane j, then (2,3).
  const __m512i first_half = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i second_half = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  constexpr size_t kStep = 8 * Sets;
  size_t b = 0;
  for (; b + kStep <= nblocks; b += kStep) {
    __m512i c0[Sets], c1[Sets], c2[Sets], c3[Sets];
    for (int s = 0; s < Sets; ++s) {
      // The 64-bit block index: its carry into counter word 1 is free.
      c0[s] = _mm512_add_epi64(_mm512_set1_epi64(int64_t(block + b + 8 * s)), lane);
      c1[s] = _mm512_srli_epi64(c0[s], 32);
      c2[s] = sub_lo;
      c3[s] = sub_hi;
    }
    for (int r = 0; r < 10; ++r) {
      const __m512i k0 = _mm512_set1_epi64(keys.k0[r]), k1 = _mm512_set1_epi64(keys.k1[r]);
      for (int s = 0; s < Sets; ++s) {
        const __m512i p0 = _mm512_mul_epu32(c0[s], m0);
        const __m512i p1 = _mm512_mul_epu32(c2[s], m1);
        // 0x96 is the truth table of a ^ b ^ c.
        c0[s] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[s], k0, 0x96);
        c2[s] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[s], k1, 0x96);
        c1[s] = p1;
        c3[s] = p0;
      }
    }
    for (int s = 0; s < Sets; ++s) {
      const __m512i q01 = _mm512_mask_blend_epi32(0xAAAA, c0[s], _mm512_slli_epi64(c1[s], 32));
      const __m512i q23 = _mm512_mask_blend_epi32(0xAAAA, c2[s], _mm512_slli_epi64(c3[s], 32));
      const size_t w = 4 * (b + 8 * s);
      sink(w, _mm512_permutex2var_epi64(q01, first_half, q23));
      sink(w + 16, _mm512_permutex2var_epi64(q01, second_half, q23));
    }
  }
  return b;
}
#endif

}  // namespace reprise::rng::detail
