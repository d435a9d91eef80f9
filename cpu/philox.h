#pragma once
// Philox words in bulk on the CPU: stream_word(seed, subsequence, first + i)
// for a range of i (rng/philox.h), many blocks at a time with AVX-512 or
// AVX2, one at a time at the scalar level. Every level yields the same
// words.
//
// The vector forms hold one Philox block per 64-bit lane, each counter word
// in the low half of its own vector (c0 .. c3). The 32 x 32 -> 64 multiply
// reads only the low halves and returns the full products, so a round is
// two multiplies, two shifts and two three-way xors: the high halves carry
// junk that no multiply reads and the final pack drops. Several independent
// sets per step hide the multiply latency (a round's chain is mul -> shift
// -> xor).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/vec.h"
#include "rng/philox.h"

REPRISE_CPU_BEGIN

// The ten round keys, computed once per call instead of once per step.
struct RoundKeys {
  uint32_t k0[10];
  uint32_t k1[10];
  explicit RoundKeys(rng::Key key) {
    for (int r = 0; r < 10; ++r) {
      k0[r] = key.w[0] + uint32_t(r) * rng::kPhiloxW0;
      k1[r] = key.w[1] + uint32_t(r) * rng::kPhiloxW1;
    }
  }
};

#if defined(REPRISE_CPU_LEVEL_AVX512)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which it
// then flags as maybe-uninitialized where they are inlined (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Blocks [block, block + 8 * Sets * steps) of a subsequence, steps =
// nblocks / (8 * Sets): for each 16 consecutive words, calls sink(w, words)
// with w the index of the first (0 = word 0 of `block`) and words in stream
// order. Returns how many blocks it did.
template <int Sets, class Sink>
REPRISE_CPU_INLINE size_t philox_steps(const RoundKeys& keys, uint64_t subsequence, uint64_t block,
                                       size_t nblocks, const Sink& sink) {
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i m0 = _mm512_set1_epi64(rng::kPhiloxM0), m1 = _mm512_set1_epi64(rng::kPhiloxM1);
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
#pragma GCC diagnostic pop

// Whole blocks with the vector steps, storing their words.
inline size_t vector_blocks(const RoundKeys& keys, uint64_t subsequence, uint64_t block,
                            uint32_t* out, size_t nblocks) {
  auto store = [](uint32_t* o) {
    return [o](size_t w, __m512i words) { _mm512_storeu_si512(o + w, words); };
  };
  size_t b = philox_steps<4>(keys, subsequence, block, nblocks, store(out));
  b += philox_steps<1>(keys, subsequence, block + b, nblocks - b, store(out + 4 * b));
  return b;
}
#elif defined(REPRISE_CPU_LEVEL_AVX2)
// The AVX2 form: 4 blocks per vector, xors in two steps.
template <int Sets>
size_t avx2_steps(const RoundKeys& keys, uint64_t subsequence, uint64_t block, uint32_t* out,
                  size_t nblocks) {
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  const __m256i m0 = _mm256_set1_epi64x(rng::kPhiloxM0), m1 = _mm256_set1_epi64x(rng::kPhiloxM1);
  const __m256i sub_lo = _mm256_set1_epi64x(int64_t(uint32_t(subsequence)));
  const __m256i sub_hi = _mm256_set1_epi64x(int64_t(subsequence >> 32));
  constexpr size_t kStep = 4 * Sets;
  size_t b = 0;
  for (; b + kStep <= nblocks; b += kStep) {
    __m256i c0[Sets], c1[Sets], c2[Sets], c3[Sets];
    for (int s = 0; s < Sets; ++s) {
      c0[s] = _mm256_add_epi64(_mm256_set1_epi64x(int64_t(block + b + 4 * s)), lane);
      c1[s] = _mm256_srli_epi64(c0[s], 32);
      c2[s] = sub_lo;
      c3[s] = sub_hi;
    }
    for (int r = 0; r < 10; ++r) {
      const __m256i k0 = _mm256_set1_epi64x(keys.k0[r]), k1 = _mm256_set1_epi64x(keys.k1[r]);
      for (int s = 0; s < Sets; ++s) {
        const __m256i p0 = _mm256_mul_epu32(c0[s], m0);
        const __m256i p1 = _mm256_mul_epu32(c2[s], m1);
        c0[s] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[s]), k0);
        c2[s] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[s]), k1);
        c1[s] = p1;
        c3[s] = p0;
      }
    }
    for (int s = 0; s < Sets; ++s) {
      const __m256i q01 = _mm256_blend_epi32(c0[s], _mm256_slli_epi64(c1[s], 32), 0xAA);
      const __m256i q23 = _mm256_blend_epi32(c2[s], _mm256_slli_epi64(c3[s], 32), 0xAA);
      // Per 128-bit half: blocks (0 | 2) and (1 | 3); the permutes pair them.
      const __m256i even = _mm256_unpacklo_epi64(q01, q23), odd = _mm256_unpackhi_epi64(q01, q23);
      auto* o = reinterpret_cast<__m256i*>(out + 4 * (b + 4 * s));
      _mm256_storeu_si256(o, _mm256_permute2x128_si256(even, odd, 0x20));
      _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(even, odd, 0x31));
    }
  }
  return b;
}

inline size_t vector_blocks(const RoundKeys& keys, uint64_t subsequence, uint64_t block,
                            uint32_t* out, size_t nblocks) {
  size_t b = avx2_steps<4>(keys, subsequence, block, out, nblocks);
  b += avx2_steps<1>(keys, subsequence, block + b, out + 4 * b, nblocks - b);
  return b;
}
#else
inline size_t vector_blocks(const RoundKeys&, uint64_t, uint64_t, uint32_t*, size_t) { return 0; }
#endif

// Copies words [from, to) of one block (0 <= from <= to <= 4).
inline void partial_block(rng::Key key, uint64_t subsequence, uint64_t block, int from, int to,
                          uint32_t* out) {
  const rng::Block r = rng::philox4x32(rng::stream_counter(subsequence, block), key);
  std::copy(r.w + from, r.w + to, out);
}

// out[i] = stream_word(seed, subsequence, first + i) for i in [0, count).
inline void generate_words(uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                           size_t count) {
  if (count == 0) return;
  const rng::Key key = rng::seed_key(seed);
  // A head up to the next block boundary, whole blocks, then a tail.
  const int lane = int(first & 3);
  if (lane != 0) {
    const int to = int(std::min<uint64_t>(4, lane + count));
    partial_block(key, subsequence, first >> 2, lane, to, out);
    const size_t done = size_t(to - lane);
    out += done;
    first += done;
    count -= done;
  }
  const size_t nblocks = count / 4;
  size_t b = vector_blocks(RoundKeys(key), subsequence, first >> 2, out, nblocks);
  for (; b < nblocks; ++b) partial_block(key, subsequence, (first >> 2) + b, 0, 4, out + 4 * b);
  const size_t tail = count % 4;
  if (tail != 0)
    partial_block(key, subsequence, (first >> 2) + nblocks, 0, int(tail), out + 4 * nblocks);
}

REPRISE_CPU_END
