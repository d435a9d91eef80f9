#pragma once
// Transposing through registers, for the matrix products' packing
// (cpu/gemm.cpp, cpu/gemm_bf16.cpp): every load is a contiguous one.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/vec.h"

REPRISE_CPU_BEGIN

// Transposes a square block of registers: afterwards lane r of v[c] holds
// what lane c of v[r] held.
#if defined(REPRISE_CPU_LEVEL_AVX512)
// GCC 12's unpack and shuffle intrinsics pass an undefined vector as the
// merge source of their unmasked forms, which -Wuninitialized (or, once
// inlined, -Wmaybe-uninitialized) reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Pairs of rows are interleaved by 32 then 64 bits, which transposes each
// 4 x 4 block within 128-bit lanes, then the 128-bit lanes themselves are
// transposed in two rounds of shuffles.
inline void transpose_block(NativeF32 (&v)[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    a[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // b[g + j], 128-bit lane L: column 4L + j of rows g..g+3
    const __m512d a0 = _mm512_castps_pd(a[g]), a1 = _mm512_castps_pd(a[g + 1]);
    const __m512d a2 = _mm512_castps_pd(a[g + 2]), a3 = _mm512_castps_pd(a[g + 3]);
    b[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    b[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    b[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    b[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  for (int j = 0; j < 4; ++j) {  // 128-bit lane L of b[4g + j] goes to lane g of v[4L + j]
    const __m512 t0 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x44);
    const __m512 t1 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xEE);
    const __m512 t2 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x44);
    const __m512 t3 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xEE);
    v[j] = _mm512_shuffle_f32x4(t0, t2, 0x88);
    v[4 + j] = _mm512_shuffle_f32x4(t0, t2, 0xDD);
    v[8 + j] = _mm512_shuffle_f32x4(t1, t3, 0x88);
    v[12 + j] = _mm512_shuffle_f32x4(t1, t3, 0xDD);
  }
}
#pragma GCC diagnostic pop
#elif defined(REPRISE_CPU_LEVEL_AVX2)
// Rows interleaved by 32 bits, then 64 (4 x 4 blocks within 128-bit
// halves), then the halves swapped across.
inline void transpose_block(NativeF32 (&v)[8]) {
  __m256 a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    a[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int g = 0; g < 8; g += 4) {
    b[g] = _mm256_shuffle_ps(a[g], a[g + 2], 0x44);
    b[g + 1] = _mm256_shuffle_ps(a[g], a[g + 2], 0xEE);
    b[g + 2] = _mm256_shuffle_ps(a[g + 1], a[g + 3], 0x44);
    b[g + 3] = _mm256_shuffle_ps(a[g + 1], a[g + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x20);
    v[4 + j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x31);
  }
}
#endif

// Any other square block (through memory).
template <class V, int L>
inline void transpose_block(V (&v)[L]) {
  using T = std::remove_cvref_t<decltype(v[0][0])>;
  T m[L][L];
  for (int r = 0; r < L; ++r) std::memcpy(m[r], &v[r], sizeof(V));
  for (int r = 0; r < L; ++r) {
    for (int c = 0; c < L; ++c) v[r][c] = m[c][r];
  }
}

// Reads `lines` (<= one register's lanes) lines of kc values, line r at
// src + r * stride, and hands store(k, register) the register whose lane r
// is line r's value k (lanes >= lines zero), for k in [0, kc): square
// blocks loaded row by row and transposed in registers, so every load is a
// contiguous one.
template <class T, class Store>
inline void lines_by_k(const T* src, int64_t stride, int64_t lines, int64_t kc, Store store) {
  constexpr int L = kLanes<T>;
  for (int64_t k0 = 0; k0 < kc; k0 += L) {
    const int64_t nk = std::min<int64_t>(L, kc - k0);
    Native<T> v[L];
    for (int r = 0; r < L; ++r)
      v[r] = r < lines ? load_first_native(src + r * stride + k0, nk) : Native<T>{};
    transpose_block(v);
    for (int64_t k = 0; k < nk; ++k) store(k0 + k, v[k]);
  }
}

REPRISE_CPU_END
