#pragma once
// The register-blocked product under every CPU matrix product: the GEMM
// (cpu/gemm.cpp, on packed panels) and attention's tiles (cpu/attention.cpp,
// on rows in place). R rows by NP registers of columns of C stay in R * NP
// registers; per k it loads NP registers of B, broadcasts R scalars of A and
// issues R * NP fused multiply-adds.
//
// Each element of C is the sequential FMA chain over k in order, starting
// from C's value (or 0): c = fma(a[k], b[k], c) for k = 0, 1, ... . So its
// bits depend on its row of A and column of B alone: not on the blocking,
// the level's register width, the thread count or the memory layout.
//
// The blocking per level: AVX-512 12 x 32 f32 (24 of its 32 registers),
// AVX2 6 x 16 (12 of 16), scalar 6 x 8 (SSE2 or NEON, 12 of 16).

#include <cstdint>

#include "cpu/vec.h"

REPRISE_CPU_BEGIN

inline int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }
inline int64_t round_up(int64_t n, int64_t d) { return ceil_div(n, d) * d; }

// Rows and columns of C one call keeps in registers.
inline constexpr int kTileRows = kRegisterBytes == 64 ? 12 : 6;
template <class T>
inline constexpr int kTileCols = 2 * kLanes<T>;

// acc[r][c] = fma chain of a(r, k) * B(k, c-th register) over k in [0, K),
// B's row k at b + k * ldb (NP registers of contiguous columns).
template <class T, int R, int NP, class AAt>
REPRISE_CPU_INLINE void tile_fma(int64_t K, const AAt& a, const T* b, int64_t ldb,
                                 Native<T> (&acc)[R][NP]) {
  for (int64_t k = 0; k < K; ++k) {
    Native<T> bk[NP];
    for (int c = 0; c < NP; ++c) bk[c] = load_native(b + k * ldb + c * kLanes<T>);
    for (int r = 0; r < R; ++r) {
      const Native<T> ar = splat_native(a(r, k));
      for (int c = 0; c < NP; ++c) acc[r][c] = fma_native(ar, bk[c], acc[r][c]);
    }
  }
}

// C (R x NP * lanes, rows ldc apart) = [C +] A B over K, A read through
// strides (element (r, k) at a[r * am + k * ak]), B's rows contiguous and
// ldb apart. Columns C holds are all computed: the caller pads B and C.
template <class T, int R, int NP>
void tile_product(int64_t K, const T* a, int64_t am, int64_t ak, const T* b, int64_t ldb, T* c,
                  int64_t ldc, bool accumulate) {
  Native<T> acc[R][NP];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NP; ++j) {
      acc[r][j] = accumulate ? load_native(c + r * ldc + j * kLanes<T>) : Native<T>{};
    }
  }
  tile_fma<T, R, NP>(
      K, [&](int r, int64_t k) { return a[r * am + k * ak]; }, b, ldb, acc);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NP; ++j) store_native(c + r * ldc + j * kLanes<T>, acc[r][j]);
  }
}

// M rows of C by `cols` columns (a multiple of 16), as tile_product calls:
// full tiles of kTileRows x kTileCols, then the remaining rows 4 at a time
// and one at a time, and the remaining columns one register at a time.
template <class T>
void strided_product(int64_t M, int64_t cols, int64_t K, const T* a, int64_t am, int64_t ak,
                     const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  constexpr int L = kLanes<T>, NR = kTileCols<T>;
  auto rows = [&]<int NP>(int64_t j) {
    int64_t m = 0;
    for (; m + kTileRows <= M; m += kTileRows)
      tile_product<T, kTileRows, NP>(K, a + m * am, am, ak, b + j, ldb, c + m * ldc + j, ldc,
                                     accumulate);
    for (; m + 4 <= M; m += 4)
      tile_product<T, 4, NP>(K, a + m * am, am, ak, b + j, ldb, c + m * ldc + j, ldc, accumulate);
    for (; m < M; ++m)
      tile_product<T, 1, NP>(K, a + m * am, am, ak, b + j, ldb, c + m * ldc + j, ldc, accumulate);
  };
  int64_t j = 0;
  for (; j + NR <= cols; j += NR) rows.template operator()<2>(j);
  for (; j < cols; j += L) rows.template operator()<1>(j);
}

REPRISE_CPU_END
