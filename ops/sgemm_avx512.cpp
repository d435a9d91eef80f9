// The f32 AVX-512 GEMM: packing, the micro-kernel and the task grid.
//
// MR = 12 rows by NR = 32 columns (two vectors) of C per micro-kernel call:
// per k it loads two vectors of the B panel, broadcasts 12 scalars of the A
// panel and issues 24 FMAs into 24 accumulators, so the two FMA ports stay
// busy and the loads fit beside them. K is cut into blocks of at most KC so
// that a B panel (KC x 32 floats, 32 KiB) stays in L1 while the task's A
// panels stream past it from L2; a block after the first reloads C and
// carries on adding, so each element's sum runs over k in order.
//
// A product runs in two phases: every B panel of every block is packed (in
// parallel over panels), then tasks of up to mb x nb outputs each pack
// their rows of A block by block and run the micro-kernel over them. Padding rows
// and columns of the panels are zero and never stored.
#include "ops/sgemm_avx512.h"

#ifdef __AVX512F__
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "engine/threads.h"
#else
#include "engine/error.h"
#endif

namespace reprise::ops::detail {

#ifndef __AVX512F__

bool sgemm_avx512_built() { return false; }
void sgemm_avx512(const Problem&, const float*, const float*, float*) {
  REPRISE_CHECK(false, "sgemm_avx512: this build has no AVX-512 kernel (built without AVX-512F)");
}

#else

bool sgemm_avx512_built() { return true; }

namespace {

constexpr int64_t MR = 12;   // rows of a micro-tile
constexpr int64_t NR = 32;   // columns of a micro-tile: two vectors
constexpr int64_t KC = 256;  // most k per block
// Task grid: row blocks of about kRowBlock rows, cut finer (down to
// kMinRowBlock rows, then by columns) until the batch has kMinTasks tasks,
// then into a multiple of the thread count where the rows allow, with the
// row panels shared out evenly. (The bits do not depend on the grid, so it
// may depend on the thread count.)
constexpr int64_t kRowBlock = 192;
constexpr int64_t kMinRowBlock = 48;
constexpr int64_t kMinTasks = 8;

// The lanes [0, n) of a 16-lane vector, n clamped to [0, 16].
__mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// 64-byte aligned floats, uninitialised.
struct AlignedFloats {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  explicit AlignedFloats(int64_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, size_t(round_up(n, 16)) * sizeof(float)))) {
    if (!data) throw std::bad_alloc();
  }
};

// One matrix of an operand: element (i, j) at data[i * outer + j] when row
// major, else data[j * outer + i].
struct Matrix {
  const float* data;
  int64_t outer;
  bool row_major;
};

// GCC 12's unpack and shuffle intrinsics pass an undefined vector as the
// merge source of their unmasked forms, which -Wuninitialized reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// Transposes a 16 x 16 block in registers: afterwards lane r of v[c] holds
// what lane c of v[r] held. Pairs of rows are interleaved by 32 then 64
// bits, which transposes each 4 x 4 block within 128-bit lanes, then the
// 128-bit lanes themselves are transposed in two rounds of shuffles.
void transpose16(__m512 v[16]) {
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

// Reads `lines` (<= 16) lines of kc floats, line r at src + r * stride, and
// hands store(k, vector) the vector whose lane r is line r's value k (lanes
// >= lines zero), for k in [0, kc): 16 x 16 blocks loaded row by row and
// transposed in registers, so every load is a contiguous one.
template <class Store>
void lines_by_k(const float* src, int64_t stride, int64_t lines, int64_t kc, Store store) {
  for (int64_t k0 = 0; k0 < kc; k0 += 16) {
    const int64_t nk = std::min<int64_t>(16, kc - k0);
    const __mmask16 valid = lanes(nk);
    __m512 v[16];
    for (int64_t r = 0; r < 16; ++r)
      v[r] = r < lines ? _mm512_maskz_loadu_ps(valid, src + r * stride + k0) : _mm512_setzero_ps();
    transpose16(v);
    for (int64_t k = 0; k < nk; ++k) store(k0 + k, v[k]);
  }
}

// Packs rows [i0, i0 + rows) (rows <= MR) and k in [k0, k0 + kc) of a into
// dst (kc, MR): dst[k * MR + r] = a(i0 + r, k0 + k), zero for r >= rows.
void pack_a_panel(const Matrix& a, int64_t i0, int64_t rows, int64_t k0, int64_t kc, float* dst) {
  const __mmask16 panel = lanes(MR);
  auto put = [&](int64_t k, __m512 v) { _mm512_mask_storeu_ps(dst + k * MR, panel, v); };
  if (a.row_major) {
    lines_by_k(a.data + i0 * a.outer + k0, a.outer, rows, kc, put);
  } else {  // the panel's rows lie side by side at each k
    const __mmask16 valid = lanes(rows);
    const float* src = a.data + k0 * a.outer + i0;
    for (int64_t k = 0; k < kc; ++k) put(k, _mm512_maskz_loadu_ps(valid, src + k * a.outer));
  }
}

// Packs columns [j0, j0 + cols) (cols <= NR) and k in [k0, k0 + kc) of b
// into dst (kc, NR): dst[k * NR + c] = b(k0 + k, j0 + c), zero for c >= cols.
void pack_b_panel(const Matrix& b, int64_t j0, int64_t cols, int64_t k0, int64_t kc, float* dst) {
  if (b.row_major) {  // the panel's columns lie side by side at each k
    const __mmask16 lo = lanes(cols), hi = lanes(cols - 16);
    const float* src = b.data + k0 * b.outer + j0;
    for (int64_t k = 0; k < kc; ++k) {
      _mm512_store_ps(dst + k * NR, _mm512_maskz_loadu_ps(lo, src + k * b.outer));
      _mm512_store_ps(dst + k * NR + 16, _mm512_maskz_loadu_ps(hi, src + k * b.outer + 16));
    }
    return;
  }
  // Column c of the panel is contiguous in k: two halves of 16 columns.
  const float* src = b.data + j0 * b.outer + k0;
  for (int64_t half = 0; half < NR; half += 16) {
    const int64_t n = std::clamp<int64_t>(cols - half, 0, 16);
    lines_by_k(src + half * b.outer, b.outer, n, kc,
               [&](int64_t k, __m512 v) { _mm512_store_ps(dst + k * NR + half, v); });
  }
}

// C rows [0, rows) x the columns in (lo, hi) masks += or = (A panel) (B panel)
// over kc values of k; `carry` adds to what C holds (a later k block).
void micro_kernel(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool carry,
                  int64_t rows, __mmask16 lo, __mmask16 hi) {
  __m512 acc0[MR], acc1[MR];
  for (int64_t r = 0; r < MR; ++r) {
    const bool load = carry && r < rows;
    acc0[r] = load ? _mm512_maskz_loadu_ps(lo, c + r * ldc) : _mm512_setzero_ps();
    acc1[r] = load ? _mm512_maskz_loadu_ps(hi, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(bp + k * NR), b1 = _mm512_load_ps(bp + k * NR + 16);
    for (int64_t r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(ap[k * MR + r]);
      acc0[r] = _mm512_fmadd_ps(a, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(a, b1, acc1[r]);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, lo, acc0[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, hi, acc1[r]);
  }
}

// The product's blocks of k and tasks of outputs.
struct Plan {
  int64_t kc;          // k per block (the last block may be shorter)
  int64_t panels;      // B panels per block: ceil(N / NR)
  int64_t row_panels;  // A panels: ceil(M / MR)
  int64_t tm, tn;      // tasks per matrix along M and N
  int64_t mb, nb;      // most rows (a multiple of MR) and columns (of NR) of a task
  int64_t packed_per;  // floats of packed B per matrix: K * panels * NR

  // The first row of row block r, which row_begin(r + 1) ends: the blocks
  // share the A panels out evenly.
  int64_t row_begin(int64_t r, int64_t M) const { return std::min(M, r * row_panels / tm * MR); }
};

Plan plan_of(const Problem& p, int threads) {
  Plan s;
  s.kc = ceil_div(p.K, ceil_div(p.K, KC));
  s.panels = ceil_div(p.N, NR);
  s.row_panels = ceil_div(p.M, MR);
  s.packed_per = p.K * s.panels * NR;
  int64_t tm = ceil_div(p.M, kRowBlock), tn = 1;
  while (p.batch * tm * tn < kMinTasks) {
    if (ceil_div(p.M, tm + 1) >= kMinRowBlock) {
      ++tm;
    } else if (tn < s.panels) {
      ++tn;
    } else {
      break;
    }
  }
  while ((p.batch * tm * tn) % threads != 0 && tm < s.row_panels) ++tm;
  s.tm = std::min(tm, s.row_panels);
  s.nb = ceil_div(s.panels, tn) * NR;
  s.tn = ceil_div(p.N, s.nb);
  s.mb = ceil_div(s.row_panels, s.tm) * MR;
  return s;
}

Matrix matrix_of(const Layout& l, const float* base, int64_t bi) {
  return {base + l.offsets[size_t(bi)], l.outer, l.row_major};
}

// Packs B panel `t` of the whole batch (t over batch x blocks x panels).
void pack_b_task(const Problem& p, const Plan& s, const float* b, float* packed, int64_t t) {
  const int64_t nkb = ceil_div(p.K, s.kc);
  const int64_t bi = t / (nkb * s.panels), kb = t / s.panels % nkb, pj = t % s.panels;
  const int64_t k0 = kb * s.kc, kc = std::min(s.kc, p.K - k0), j0 = pj * NR;
  float* dst = packed + bi * s.packed_per + k0 * s.panels * NR + pj * kc * NR;
  pack_b_panel(matrix_of(p.b, b, bi), j0, std::min(NR, p.N - j0), k0, kc, dst);
}

// Output task `t` (over batch x tm x tn): its rows of A packed block by
// block into a_buf, each B panel of its columns against each A panel.
void output_task(const Problem& p, const Plan& s, const float* a, const float* packed, float* c,
                 float* a_buf, int64_t t) {
  const int64_t per = s.tm * s.tn, bi = t / per, r = t % per / s.tn;
  const int64_t i0 = s.row_begin(r, p.M), j0 = t % s.tn * s.nb;
  const int64_t m = s.row_begin(r + 1, p.M) - i0, n = std::min(s.nb, p.N - j0);
  const Matrix am = matrix_of(p.a, a, bi);
  float* cm = c + bi * p.M * p.N;
  for (int64_t k0 = 0; k0 < p.K; k0 += s.kc) {
    const int64_t kc = std::min(s.kc, p.K - k0);
    for (int64_t i = 0; i < m; i += MR)
      pack_a_panel(am, i0 + i, std::min(MR, m - i), k0, kc, a_buf + i * kc);
    const float* block = packed + bi * s.packed_per + k0 * s.panels * NR;
    for (int64_t j = 0; j < n; j += NR) {
      const int64_t cols = std::min(NR, n - j);
      const float* bp = block + (j0 + j) / NR * kc * NR;
      for (int64_t i = 0; i < m; i += MR) {
        micro_kernel(kc, a_buf + i * kc, bp, cm + (i0 + i) * p.N + j0 + j, p.N, k0 > 0,
                     std::min(MR, m - i), lanes(cols), lanes(cols - 16));
      }
    }
  }
}

}  // namespace

void sgemm_avx512(const Problem& p, const float* a, const float* b, float* c) {
  const int nt = threads::num_threads();
  const Plan s = plan_of(p, nt);
  const int64_t pack_tasks = p.batch * ceil_div(p.K, s.kc) * s.panels;
  const int64_t tasks = p.batch * s.tm * s.tn;
  const int64_t a_floats = round_up(s.mb * s.kc, 16);  // one thread's packed rows of A
  const bool serial = tasks == 1 || double(p.batch) * p.M * p.N * p.K < kParallelMacs;
  const int workers = serial ? 1 : nt;
  AlignedFloats packed(p.batch * s.packed_per), a_bufs(workers * a_floats);
  float* pb = packed.data.get();
  threads::claim_tasks(workers, pack_tasks, [&](int, int64_t t) { pack_b_task(p, s, b, pb, t); });
  threads::claim_tasks(workers, tasks, [&](int thread, int64_t t) {
    output_task(p, s, a, pb, c, a_bufs.data.get() + thread * a_floats, t);
  });
}

#endif  // __AVX512F__

}  // namespace reprise::ops::detail
