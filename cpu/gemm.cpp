// The CPU matrix product: a batch of strided (M, K) @ (K, N) products into
// a contiguous (batch, M, N) output, on cpu/tile_product.h's kernel.
//
// M = rows of a and of the output, K = the inner dim, N = columns of b and
// of the output; "..." = batch dims, broadcast as in numpy.
//
// B is packed once per product into panels of NR columns (kTileCols), A once
// per row block of a task into panels of MR rows (kTileRows), and the tile
// kernel runs MR x NR blocks of C over them. K is cut into blocks of at most
// KC so that a B panel stays in L1 while the task's A panels stream past it
// from L2; a block after the first reloads C and carries on adding, so each
// element's sum still runs over k in order from 0, one FMA each: its bits
// depend on its row of A and column of B alone (cpu/tile_product.h), at
// every capability, thread count and operand layout.
//
// A product runs in two phases: every B panel of every block is packed (in
// parallel over panels), then tasks of up to mb x nb outputs each pack their
// rows of A block by block and run the tile kernel over them. Padding rows
// and columns of the panels are zero and never stored.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "cpu/backend.h"
#include "cpu/tile_product.h"
#include "engine/strided_loop.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

constexpr int64_t MR = kTileRows;
constexpr int64_t KC = 256;  // most k per block
// Task grid: row blocks of about kRowBlock rows, cut finer (down to
// kMinRowBlock rows, then by columns) until the batch has kMinTasks tasks,
// then into a multiple of the thread count where the rows allow, with the
// row panels shared out evenly. (The bits do not depend on the grid, so it
// may depend on the thread count.)
constexpr int64_t kRowBlock = 192;
constexpr int64_t kMinRowBlock = 48;
constexpr int64_t kMinTasks = 8;
// Products of fewer multiply-adds run on the calling thread: waking the
// other threads would cost more than it saves. It changes no bits.
constexpr double kParallelMacs = double(1 << 20);

// How one operand's matrices lie in memory: each is row-major (column
// stride 1) or column-major (row stride 1) with leading dimension `outer`;
// matrix i of the batch starts at offsets[i].
struct Layout {
  bool row_major = true;
  int64_t outer = 1;
  std::vector<int64_t> offsets;
};

struct Problem {
  int64_t batch, M, N, K;
  Layout a, b;
};

// The storage order of a (rows, cols) matrix with strides (rs, cs), or false
// when neither fits. A dim of extent 1 may have any stride. The leading
// dimension must cover a row (column), as the packing reads it.
bool matrix_order(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Layout& out) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
    out.row_major = true;
    out.outer = rows == 1 ? cols : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
    out.row_major = false;
    out.outer = cols == 1 ? rows : cs;
    return true;
  }
  return false;
}

// t itself when its matrices (last two dims) have a storage order the
// packing reads, else a contiguous copy.
Tensor gemm_readable(const Tensor& t) {
  Layout unused;
  const bool ok = matrix_order(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1), unused);
  return ok ? t : t.contiguous();
}

// Element offsets of each matrix of t over the broadcast batch shape
// (row-major order of the batch index; stride 0 along broadcast dims).
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t nb = int64_t(batch.size()), lead = nb - (t.dim() - 2);
  Shape st(batch.size(), 0);
  for (int64_t d = lead; d < nb; ++d) st[d] = t.size(d - lead) == 1 ? 0 : t.stride(d - lead);
  std::vector<int64_t> offsets(size_t(numel(batch)));
  Shape idx(batch.size(), 0);
  for (int64_t& off : offsets) {
    off = 0;
    for (int64_t d = 0; d < nb; ++d) off += idx[d] * st[d];
    for (int64_t d = nb - 1; d >= 0 && ++idx[d] == batch[d]; --d) idx[d] = 0;
  }
  return offsets;
}

// `n` T aligned to 64 bytes, uninitialised.
template <class T>
struct AlignedBuffer {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data;
  explicit AlignedBuffer(int64_t n)
      : data(
            static_cast<T*>(std::aligned_alloc(64, size_t(round_up(n * int64_t(sizeof(T)), 64))))) {
    if (!data) throw std::bad_alloc();
  }
};

// One matrix of an operand: element (i, j) at data[i * outer + j] when row
// major, else data[j * outer + i].
template <class T>
struct Matrix {
  const T* data;
  int64_t outer;
  bool row_major;
};

// Transposes a square block of registers: afterwards lane r of v[c] holds
// what lane c of v[r] held.
#if defined(REPRISE_CPU_LEVEL_AVX512)
// GCC 12's unpack and shuffle intrinsics pass an undefined vector as the
// merge source of their unmasked forms, which -Wuninitialized reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// Pairs of rows are interleaved by 32 then 64 bits, which transposes each
// 4 x 4 block within 128-bit lanes, then the 128-bit lanes themselves are
// transposed in two rounds of shuffles.
void transpose_block(NativeF32 (&v)[16]) {
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
void transpose_block(NativeF32 (&v)[8]) {
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
void transpose_block(V (&v)[L]) {
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
void lines_by_k(const T* src, int64_t stride, int64_t lines, int64_t kc, Store store) {
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

// Packs rows [i0, i0 + rows) (rows <= MR) and k in [k0, k0 + kc) of a into
// dst (kc, MR): dst[k * MR + r] = a(i0 + r, k0 + k), zero for r >= rows.
template <class T>
void pack_a_panel(const Matrix<T>& a, int64_t i0, int64_t rows, int64_t k0, int64_t kc, T* dst) {
  constexpr int L = kLanes<T>;
  if (a.row_major) {
    for (int64_t g = 0; g < MR; g += L) {  // groups of up to L rows
      const int64_t width = std::min<int64_t>(L, MR - g);
      lines_by_k(a.data + (i0 + g) * a.outer + k0, a.outer, std::clamp<int64_t>(rows - g, 0, L), kc,
                 [&](int64_t k, Native<T> v) { store_first_native(dst + k * MR + g, v, width); });
    }
  } else {  // the panel's rows lie side by side at each k
    const T* src = a.data + k0 * a.outer + i0;
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t g = 0; g < MR; g += L) {
        store_first_native(dst + k * MR + g, load_first_native(src + k * a.outer + g, rows - g),
                           std::min<int64_t>(L, MR - g));
      }
    }
  }
}

// Packs columns [j0, j0 + cols) (cols <= NR) and k in [k0, k0 + kc) of b
// into dst (kc, NR): dst[k * NR + c] = b(k0 + k, j0 + c), zero for c >= cols.
template <class T>
void pack_b_panel(const Matrix<T>& b, int64_t j0, int64_t cols, int64_t k0, int64_t kc, T* dst) {
  constexpr int L = kLanes<T>, NR = kTileCols<T>;
  if (b.row_major) {  // the panel's columns lie side by side at each k
    const T* src = b.data + k0 * b.outer + j0;
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t g = 0; g < NR; g += L)
        store_native(dst + k * NR + g, load_first_native(src + k * b.outer + g, cols - g));
    }
    return;
  }
  // Column c of the panel is contiguous in k: groups of L columns.
  const T* src = b.data + j0 * b.outer + k0;
  for (int64_t g = 0; g < NR; g += L) {
    lines_by_k(src + g * b.outer, b.outer, std::clamp<int64_t>(cols - g, 0, L), kc,
               [&](int64_t k, Native<T> v) { store_native(dst + k * NR + g, v); });
  }
}

// One MR x NR block of C (rows ldc apart) = or += (A panel) (B panel) over
// kc values of k; `carry` adds to what C holds (a later k block).
template <class T>
void full_tile(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc, bool carry) {
  constexpr int L = kLanes<T>, NP = kTileCols<T> / L;
  Native<T> acc[MR][NP];
  for (int64_t r = 0; r < MR; ++r) {
    for (int j = 0; j < NP; ++j) acc[r][j] = carry ? load_native(c + r * ldc + j * L) : Native<T>{};
  }
  tile_fma<T, MR, NP>(
      kc, [ap](int r, int64_t k) { return ap[k * MR + r]; }, bp, kTileCols<T>, acc);
  for (int64_t r = 0; r < MR; ++r) {
    for (int j = 0; j < NP; ++j) store_native(c + r * ldc + j * L, acc[r][j]);
  }
}

// C rows [0, rows) and columns [0, cols) (a tile's valid part) = or +=
// (A panel) (B panel): in place for a full tile, else through a tile-sized
// buffer, so that nothing past the valid part is read or written.
template <class T>
void micro_kernel(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc, bool carry, int64_t rows,
                  int64_t cols) {
  constexpr int64_t NR = kTileCols<T>;
  if (rows == MR && cols == NR) return full_tile(kc, ap, bp, c, ldc, carry);
  alignas(64) T tile[MR * NR] = {};
  if (carry) {
    for (int64_t r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, tile + r * NR);
  }
  full_tile(kc, ap, bp, tile, NR, carry);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(tile + r * NR, cols, c + r * ldc);
}

// The product's blocks of k and tasks of outputs.
struct Plan {
  int64_t kc;          // k per block (the last block may be shorter)
  int64_t panels;      // B panels per block: ceil(N / NR)
  int64_t row_panels;  // A panels: ceil(M / MR)
  int64_t tm, tn;      // tasks per matrix along M and N
  int64_t mb, nb;      // most rows (a multiple of MR) and columns (of NR) of a task
  int64_t packed_per;  // packed B per matrix: K * panels * NR

  // The first row of row block r, which row_begin(r + 1) ends: the blocks
  // share the A panels out evenly.
  int64_t row_begin(int64_t r, int64_t M) const { return std::min(M, r * row_panels / tm * MR); }
};

template <class T>
Plan plan_of(const Problem& p, int threads) {
  constexpr int64_t NR = kTileCols<T>;
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

template <class T>
Matrix<T> matrix_of(const Layout& l, const T* base, int64_t bi) {
  return {base + l.offsets[size_t(bi)], l.outer, l.row_major};
}

// Packs B panel `t` of the whole batch (t over batch x blocks x panels).
template <class T>
void pack_b_task(const Problem& p, const Plan& s, const T* b, T* packed, int64_t t) {
  constexpr int64_t NR = kTileCols<T>;
  const int64_t nkb = ceil_div(p.K, s.kc);
  const int64_t bi = t / (nkb * s.panels), kb = t / s.panels % nkb, pj = t % s.panels;
  const int64_t k0 = kb * s.kc, kc = std::min(s.kc, p.K - k0), j0 = pj * NR;
  T* dst = packed + bi * s.packed_per + k0 * s.panels * NR + pj * kc * NR;
  pack_b_panel(matrix_of(p.b, b, bi), j0, std::min(NR, p.N - j0), k0, kc, dst);
}

// Output task `t` (over batch x tm x tn): its rows of A packed block by
// block into a_buf, each B panel of its columns against each A panel.
template <class T>
void output_task(const Problem& p, const Plan& s, const T* a, const T* packed, T* c, T* a_buf,
                 int64_t t) {
  constexpr int64_t NR = kTileCols<T>;
  const int64_t per = s.tm * s.tn, bi = t / per, r = t % per / s.tn;
  const int64_t i0 = s.row_begin(r, p.M), j0 = t % s.tn * s.nb;
  const int64_t m = s.row_begin(r + 1, p.M) - i0, n = std::min(s.nb, p.N - j0);
  const Matrix<T> am = matrix_of(p.a, a, bi);
  T* cm = c + bi * p.M * p.N;
  for (int64_t k0 = 0; k0 < p.K; k0 += s.kc) {
    const int64_t kc = std::min(s.kc, p.K - k0);
    for (int64_t i = 0; i < m; i += MR)
      pack_a_panel(am, i0 + i, std::min(MR, m - i), k0, kc, a_buf + i * kc);
    const T* block = packed + bi * s.packed_per + k0 * s.panels * NR;
    for (int64_t j = 0; j < n; j += NR) {
      const T* bp = block + (j0 + j) / NR * kc * NR;
      for (int64_t i = 0; i < m; i += MR) {
        micro_kernel(kc, a_buf + i * kc, bp, cm + (i0 + i) * p.N + j0 + j, p.N, k0 > 0,
                     std::min(MR, m - i), std::min(NR, n - j));
      }
    }
  }
}

// Products of at most kThinRows rows (one token's projections while a
// model generates) skip packing, which would cost more than the product:
// B is read in place, a register of columns at a time (transposed in
// registers when its columns are contiguous in k), and each output is the
// FMA chain over k from 0 that the tiles compute, so the bits are the same.
constexpr int64_t kThinRows = 4;

template <class T>
void thin_product(const Problem& p, const T* a, const T* b, T* c) {
  constexpr int L = kLanes<T>;
  const int64_t panels = ceil_div(p.N, L);
  const bool serial = double(p.batch) * p.M * p.N * p.K < kParallelMacs;
  threads::claim_tasks(serial ? 1 : threads::num_threads(), p.batch * panels, [&](int, int64_t t) {
    const int64_t bi = t / panels, j0 = t % panels * L, cols = std::min<int64_t>(L, p.N - j0);
    const Matrix<T> am = matrix_of(p.a, a, bi), bm = matrix_of(p.b, b, bi);
    Native<T> acc[kThinRows] = {};             // rows of C, columns j0 .. j0 + cols
    auto add = [&](int64_t k, Native<T> bk) {  // bk: b(k, j0 ..)
      for (int64_t i = 0; i < p.M; ++i) {
        const T aik = am.row_major ? am.data[i * am.outer + k] : am.data[k * am.outer + i];
        acc[i] = fma_native(splat_native(aik), bk, acc[i]);
      }
    };
    if (bm.row_major) {
      for (int64_t k = 0; k < p.K; ++k)
        add(k, load_first_native(bm.data + k * bm.outer + j0, cols));
    } else {
      lines_by_k(bm.data + j0 * bm.outer, bm.outer, cols, p.K, add);
    }
    T* cm = c + bi * p.M * p.N;
    for (int64_t i = 0; i < p.M; ++i) store_first_native(cm + i * p.N + j0, acc[i], cols);
  });
}

template <class T>
void run_product(const Problem& p, const T* a, const T* b, T* c) {
  if (p.M <= kThinRows) return thin_product(p, a, b, c);
  const int nt = threads::num_threads();
  const Plan s = plan_of<T>(p, nt);
  const int64_t pack_tasks = p.batch * ceil_div(p.K, s.kc) * s.panels;
  const int64_t tasks = p.batch * s.tm * s.tn;
  const int64_t a_size = round_up(s.mb * s.kc, 16);  // one thread's packed rows of A
  const bool serial = tasks == 1 || double(p.batch) * p.M * p.N * p.K < kParallelMacs;
  const int workers = serial ? 1 : nt;
  AlignedBuffer<T> packed(p.batch * s.packed_per), a_bufs(workers * a_size);
  T* pb = packed.data.get();
  threads::claim_tasks(workers, pack_tasks, [&](int, int64_t t) { pack_b_task(p, s, b, pb, t); });
  threads::claim_tasks(workers, tasks, [&](int thread, int64_t t) {
    output_task(p, s, a, pb, c, a_bufs.data.get() + thread * a_size, t);
  });
}

// t widened to f32 in its memory order: a transposed view (the backward's
// w^T and g^T) widens as its transpose and is read back transposed, which
// the GEMM reads in place, instead of being copied across its strides.
Tensor widened(const Tensor& t) {
  if (t.stride(-2) == 1 && t.stride(-1) != 1)
    return t.transpose(-1, -2).to(DType::f32).transpose(-1, -2);
  return t.to(DType::f32);
}

// a (..., M, K) and b (..., K, N) of a 16-bit float dtype: there is no
// 16-bit kernel, so both widen to f32 (exactly), the f32 product
// accumulates in f32 and each element rounds once to the 16-bit dtype.
Tensor product_16bit(CpuBackend& cpu, const Tensor& a, const Tensor& b) {
  return cpu.matmul(widened(a), widened(b)).to(a.dtype());
}

}  // namespace

Tensor CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in) {
  if (is_16bit_float(a_in.dtype())) {
    return product_16bit(*this, a_in, b_in);
  }
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  const ProductShapes shapes = product_shapes(a_in.shape(), b_in.shape());
  const Shape &batch = shapes.batch, &batch_b = shapes.batch_b;
  Tensor out = Tensor::empty(shapes.out, a_in.dtype());
  if (out.numel() == 0) return out;
  if (K == 0) return out.zero_();

  NoGradGuard no_grad;  // the views below are plumbing
  const Tensor a = gemm_readable(a_in), b = gemm_readable(b_in);
  Problem p{.batch = numel(batch), .M = M, .N = N, .K = K};
  matrix_order(M, K, a.stride(-2), a.stride(-1), p.a);
  matrix_order(K, N, b.stride(-2), b.stride(-1), p.b);

  // With one b for the whole batch, a's batch and row dims fold into one
  // tall matrix when they step uniformly through memory ((B, T, C) @ (C, N)
  // is one (B*T, C) @ (C, N) product): bigger tiles, b packed fewer times.
  Layout folded;
  const Shape lead(a.shape().begin(), a.shape().end() - 1),
      lead_st(a.strides().begin(), a.strides().end() - 1);
  const StridedLayout<1> rows = coalesce<1>(lead, {lead_st});
  if (p.batch > 1 && numel(batch_b) == 1 && rows.shape.size() == 1 &&
      matrix_order(p.batch * M, K, rows.strides[0][0], a.stride(-1), folded)) {
    p.M = p.batch * M;
    p.batch = 1;
    p.a = std::move(folded);
  }
  p.a.offsets = p.batch == 1 ? std::vector<int64_t>{0} : batch_offsets(a, batch);
  p.b.offsets = p.batch == 1 ? std::vector<int64_t>{0} : batch_offsets(b, batch);

  dispatch_float(a.dtype(), "matmul", [&]<class T>() {
    run_product<T>(p, static_cast<const T*>(a.raw_data()), static_cast<const T*>(b.raw_data()),
                   out.data<T>());
  });
  return out;
}

REPRISE_CPU_END
