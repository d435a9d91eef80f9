#include "rng/words.h"

#include <algorithm>

#include "engine/error.h"
#include "rng/philox.h"
#include "rng/philox_avx512.h"

#if defined(__AVX2__) || defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which it
// then flags as maybe-uninitialized where they are inlined (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace reprise::rng {
namespace {

// Whole blocks [block, block + nblocks) of a subsequence, one at a time.
void blocks_scalar(Key key, uint64_t subsequence, uint64_t block, uint32_t* out, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b) {
    const Block r = philox4x32(stream_counter(subsequence, block + b), key);
    std::copy(r.w, r.w + 4, out + 4 * b);
  }
}

// The vector paths: see rng/philox_avx512.h for the lane layout.

#if defined(__AVX512F__)
void blocks_avx512(Key key, uint64_t subsequence, uint64_t block, uint32_t* out, size_t nblocks) {
  const detail::RoundKeys keys(key);
  auto store = [out](size_t w, __m512i words) { _mm512_storeu_si512(out + w, words); };
  size_t b = detail::philox_steps_avx512<4>(keys, subsequence, block, nblocks, store);
  auto store_rest = [out = out + 4 * b](size_t w, __m512i words) {
    _mm512_storeu_si512(out + w, words);
  };
  b += detail::philox_steps_avx512<1>(keys, subsequence, block + b, nblocks - b, store_rest);
  blocks_scalar(key, subsequence, block + b, out + 4 * b, nblocks - b);
}
#endif

#if defined(__AVX2__)
// The AVX2 form of detail::philox_steps_avx512: 4 blocks per vector, xors in
// two steps.
template <int Sets>
size_t steps_avx2(const detail::RoundKeys& keys, uint64_t subsequence, uint64_t block,
                  uint32_t* out, size_t nblocks) {
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  const __m256i m0 = _mm256_set1_epi64x(kPhiloxM0), m1 = _mm256_set1_epi64x(kPhiloxM1);
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

void blocks_avx2(Key key, uint64_t subsequence, uint64_t block, uint32_t* out, size_t nblocks) {
  const detail::RoundKeys keys(key);
  size_t b = steps_avx2<4>(keys, subsequence, block, out, nblocks);
  b += steps_avx2<1>(keys, subsequence, block + b, out + 4 * b, nblocks - b);
  blocks_scalar(key, subsequence, block + b, out + 4 * b, nblocks - b);
}
#endif

using BlocksFn = void (*)(Key, uint64_t, uint64_t, uint32_t*, size_t);

BlocksFn blocks_fn(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return blocks_scalar;
#if defined(__AVX2__)
    case Isa::avx2:
      return blocks_avx2;
#endif
#if defined(__AVX512F__)
    case Isa::avx512:
      return blocks_avx512;
#endif
    default:
      REPRISE_FAIL("rng::generate_words: this build has no ", to_string(isa), " path");
  }
}

// Copies words [from, to) of one block (0 <= from <= to <= 4).
void partial_block(Key key, uint64_t subsequence, uint64_t block, int from, int to, uint32_t* out) {
  const Block r = philox4x32(stream_counter(subsequence, block), key);
  std::copy(r.w + from, r.w + to, out);
}

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

const std::vector<Isa>& compiled_isas() {
  static const std::vector<Isa> isas = {
    Isa::scalar,
#if defined(__AVX2__)
    Isa::avx2,
#endif
#if defined(__AVX512F__)
    Isa::avx512,
#endif
  };
  return isas;
}

void generate_words(Isa isa, uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                    size_t count) {
  const BlocksFn blocks = blocks_fn(isa);
  if (count == 0) return;
  const Key key = seed_key(seed);
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
  blocks(key, subsequence, first >> 2, out, nblocks);
  const size_t tail = count % 4;
  if (tail != 0)
    partial_block(key, subsequence, (first >> 2) + nblocks, 0, int(tail), out + 4 * nblocks);
}

void generate_words(uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                    size_t count) {
  generate_words(compiled_isas().back(), seed, subsequence, first, out, count);
}

}  // namespace reprise::rng
