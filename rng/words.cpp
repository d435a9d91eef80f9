#include "rng/words.h"

#include <algorithm>

#include "engine/error.h"
#include "rng/philox.h"

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

// Whole blocks [block, block + nblocks) of a subsequence, one at a time.
void blocks_scalar(Key key, uint64_t subsequence, uint64_t block, uint32_t* out, size_t nblocks) {
  for (size_t b = 0; b < nblocks; ++b) {
    const Block r = philox4x32(stream_counter(subsequence, block + b), key);
    std::copy(r.w, r.w + 4, out + 4 * b);
  }
}

#if defined(__AVX512F__)
// 16 blocks per step, block j of the step in lane j: 32-bit lanes hold one
// counter word each (c0..c3). _mm512_mul_epu32 multiplies the even lanes to
// 64 bits, so the odd lanes are shifted down and multiplied separately, and
// the high and low halves are blended back into 32-bit lanes.
void blocks_avx512(Key key, uint64_t subsequence, uint64_t block, uint32_t* out, size_t nblocks) {
  const RoundKeys keys(key);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i m0 = _mm512_set1_epi32(int(kPhiloxM0));
  const __m512i m1 = _mm512_set1_epi32(int(kPhiloxM1));
  const __m512i sub_lo = _mm512_set1_epi32(int(uint32_t(subsequence)));
  const __m512i sub_hi = _mm512_set1_epi32(int(uint32_t(subsequence >> 32)));
  constexpr __mmask16 kOdd = 0xAAAA;
  size_t b = 0;
  for (; b + 16 <= nblocks; b += 16) {
    const uint64_t first = block + b;
    const __m512i lo = _mm512_set1_epi32(int(uint32_t(first)));
    const __m512i hi = _mm512_set1_epi32(int(uint32_t(first >> 32)));
    __m512i c0 = _mm512_add_epi32(lo, lane);
    // A lane whose low counter word wrapped carries into the high word.
    __m512i c1 =
        _mm512_mask_add_epi32(hi, _mm512_cmplt_epu32_mask(c0, lo), hi, _mm512_set1_epi32(1));
    __m512i c2 = sub_lo, c3 = sub_hi;
    for (int r = 0; r < 10; ++r) {
      const __m512i p0e = _mm512_mul_epu32(c0, m0);
      const __m512i p0o = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), m0);
      const __m512i p1e = _mm512_mul_epu32(c2, m1);
      const __m512i p1o = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), m1);
      const __m512i hi0 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p0e, 32), p0o);
      const __m512i lo0 = _mm512_mask_blend_epi32(kOdd, p0e, _mm512_slli_epi64(p0o, 32));
      const __m512i hi1 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p1e, 32), p1o);
      const __m512i lo1 = _mm512_mask_blend_epi32(kOdd, p1e, _mm512_slli_epi64(p1o, 32));
      // 0x96 is the truth table of a ^ b ^ c.
      c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(int(keys.k0[r])), 0x96);
      c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(int(keys.k1[r])), 0x96);
      c1 = lo1;
      c3 = lo0;
    }
    // Transpose lanes (block j, word k) into memory order 4 j + k. After the
    // two unpack levels each 128-bit lane L of u_i holds block 4 L + i; the
    // two 128-bit shuffles put blocks 4 i .. 4 i + 3 into output vector i.
    const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i a = _mm512_shuffle_i32x4(u0, u1, 0x44), bb = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    const __m512i c = _mm512_shuffle_i32x4(u2, u3, 0x44), d = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    uint32_t* o = out + 4 * b;
    _mm512_storeu_si512(o, _mm512_shuffle_i32x4(a, c, 0x88));
    _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(a, c, 0xDD));
    _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(bb, d, 0x88));
    _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(bb, d, 0xDD));
  }
  blocks_scalar(key, subsequence, block + b, out + 4 * b, nblocks - b);
}
#endif

#if defined(__AVX2__)
// 8 blocks per step, the AVX2 form of blocks_avx512.
void blocks_avx2(Key key, uint64_t subsequence, uint64_t block, uint32_t* out, size_t nblocks) {
  const RoundKeys keys(key);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  const __m256i m0 = _mm256_set1_epi32(int(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(int(kPhiloxM1));
  const __m256i sub_lo = _mm256_set1_epi32(int(uint32_t(subsequence)));
  const __m256i sub_hi = _mm256_set1_epi32(int(uint32_t(subsequence >> 32)));
  size_t b = 0;
  for (; b + 8 <= nblocks; b += 8) {
    const uint64_t first = block + b;
    const __m256i lo = _mm256_set1_epi32(int(uint32_t(first)));
    const __m256i hi = _mm256_set1_epi32(int(uint32_t(first >> 32)));
    __m256i c0 = _mm256_add_epi32(lo, lane);
    // Unsigned c0 < lo (a wrapped low word), as a signed compare with the
    // sign bits flipped; the all-ones mask subtracted adds the carry.
    const __m256i wrapped =
        _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(c0, sign));
    __m256i c1 = _mm256_sub_epi32(hi, wrapped);
    __m256i c2 = sub_lo, c3 = sub_hi;
    for (int r = 0; r < 10; ++r) {
      const __m256i p0e = _mm256_mul_epu32(c0, m0);
      const __m256i p0o = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
      const __m256i p1e = _mm256_mul_epu32(c2, m1);
      const __m256i p1o = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0e, 32), p0o, 0xAA);
      const __m256i lo0 = _mm256_blend_epi32(p0e, _mm256_slli_epi64(p0o, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1e, 32), p1o, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(p1e, _mm256_slli_epi64(p1o, 32), 0xAA);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int(keys.k0[r])));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int(keys.k1[r])));
      c1 = lo1;
      c3 = lo0;
    }
    // Transpose: after the unpacks each 128-bit half H of u_i holds block
    // 4 H + i; the cross-half permutes pair them up in memory order.
    const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    auto* o = reinterpret_cast<__m256i*>(out + 4 * b);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
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
