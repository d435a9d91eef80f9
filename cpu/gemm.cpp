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
#include <cstring>
#include <vector>

#include "cpu/backend.h"
#include "cpu/gemm_problem.h"
#include "cpu/tile_product.h"
#include "cpu/transpose.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

constexpr int64_t MR = kTileRows;
constexpr int64_t KC = 256;  // most k per block

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
struct Plan : TaskGrid {
  int64_t kc;          // k per block (the last block may be shorter)
  int64_t packed_per;  // packed B per matrix: K * panels * NR

  template <class T>
  static Plan of(const Problem& p, int threads) {
    Plan s{TaskGrid(p, threads, kTileCols<T>, p.K * kTileCols<T> * int64_t(sizeof(T)))};
    s.kc = ceil_div(p.K, ceil_div(p.K, KC));
    s.packed_per = p.K * s.panels * kTileCols<T>;
    return s;
  }
};

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
  const int64_t bi = s.matrix(t), r = s.row_block(t);
  const int64_t i0 = s.row_begin(r, p.M), j0 = s.column_block(t) * s.nb;
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
  const Plan s = Plan::of<T>(p, nt);
  const int64_t pack_tasks = p.batch * ceil_div(p.K, s.kc) * s.panels;
  const int64_t tasks = s.tasks(p.batch);
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

// a (..., M, K) and b (..., K, N) in f16: there is no f16 kernel, so both
// widen to f32 (exactly), the f32 product accumulates in f32 and each
// element rounds once to f16.
Tensor product_f16(CpuBackend& cpu, const Tensor& a, const Tensor& b) {
  return cpu.matmul(widened(a), widened(b)).to(a.dtype());
}

}  // namespace

Tensor CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in) {
  if (a_in.dtype() == DType::bf16) return bf16_product(a_in, b_in);
  if (a_in.dtype() == DType::f16) return product_f16(*this, a_in, b_in);
  const ProductShapes shapes = product_shapes(a_in.shape(), b_in.shape());
  Tensor out = Tensor::empty(shapes.out, a_in.dtype());
  if (out.numel() == 0) return out;
  if (a_in.size(-1) == 0) return out.zero_();

  NoGradGuard no_grad;  // the views below are plumbing
  const Tensor a = gemm_readable(a_in), b = gemm_readable(b_in);
  const Problem p = problem_of(a, b);
  dispatch_float(a.dtype(), "matmul", [&]<class T>() {
    run_product<T>(p, static_cast<const T*>(a.raw_data()), static_cast<const T*>(b.raw_data()),
                   out.data<T>());
  });
  return out;
}

REPRISE_CPU_END
