#pragma once
// What every CPU matrix product shares (cpu/gemm.cpp for f32 and f64,
// cpu/gemm_bf16.cpp for bf16): how the operands lie in memory, the batch,
// and the grid of output tasks the threads share.
//
// M = rows of a and of the output, K = the inner dim, N = columns of b and
// of the output; "..." = batch dims, broadcast as in numpy.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "cpu/tile_product.h"
#include "engine/shape.h"
#include "engine/strided_loop.h"
#include "engine/tensor.h"

REPRISE_CPU_BEGIN

// Products of fewer multiply-adds run on the calling thread: waking the
// other threads would cost more than it saves. It changes no bits.
inline constexpr double kParallelMacs = double(1 << 20);

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
inline bool matrix_order(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Layout& out) {
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
inline Tensor gemm_readable(const Tensor& t) {
  Layout unused;
  const bool ok = matrix_order(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1), unused);
  return ok ? t : t.contiguous();
}

// Element offsets of each matrix of t over the broadcast batch shape
// (row-major order of the batch index; stride 0 along broadcast dims).
inline std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
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

template <class T>
Matrix<T> matrix_of(const Layout& l, const T* base, int64_t bi) {
  return {base + l.offsets[size_t(bi)], l.outer, l.row_major};
}

// The product of a (..., M, K) and b (..., K, N), both readable by the
// packing (gemm_readable): their layouts and batch offsets. With one b for
// the whole batch, a's batch and row dims fold into one tall matrix when
// they step uniformly through memory ((B, T, C) @ (C, N) is one
// (B*T, C) @ (C, N) product): bigger tiles, b packed fewer times.
inline Problem problem_of(const Tensor& a, const Tensor& b) {
  const ProductShapes shapes = product_shapes(a.shape(), b.shape());
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Problem p{.batch = numel(shapes.batch), .M = M, .N = N, .K = K};
  matrix_order(M, K, a.stride(-2), a.stride(-1), p.a);
  matrix_order(K, N, b.stride(-2), b.stride(-1), p.b);
  Layout folded;
  const Shape lead(a.shape().begin(), a.shape().end() - 1),
      lead_st(a.strides().begin(), a.strides().end() - 1);
  const StridedLayout<1> rows = coalesce<1>(lead, {lead_st});
  if (p.batch > 1 && numel(shapes.batch_b) == 1 && rows.shape.size() == 1 &&
      matrix_order(p.batch * M, K, rows.strides[0][0], a.stride(-1), folded)) {
    p.M = p.batch * M;
    p.batch = 1;
    p.a = std::move(folded);
  }
  p.a.offsets = p.batch == 1 ? std::vector<int64_t>{0} : batch_offsets(a, shapes.batch);
  p.b.offsets = p.batch == 1 ? std::vector<int64_t>{0} : batch_offsets(b, shapes.batch);
  return p;
}

// The tasks of outputs: row blocks of about kRowBlock rows, cut finer (down
// to kMinRowBlock rows, then by columns) until the batch has kMinTasks
// tasks, then into a multiple of the thread count where the rows allow,
// with the row panels (of kTileRows rows) shared out evenly. Column blocks
// hold at most kColumnBlockBytes of packed B, and tasks run column block
// after column block, each block's row blocks one after another: they
// share its B panels while those are in the last level cache (a wide
// product, the tied LM head's 49152 columns, would otherwise stream all of
// B from memory once per row block). Not when a block would be fewer than
// kMinBlockPanels panels wide (a deep K): each task packs its rows of A
// again for each column block. (The bits do not depend on the grid, so it
// may depend on the thread count.)
struct TaskGrid {
  static constexpr int64_t kRowBlock = 192, kMinRowBlock = 48, kMinTasks = 8;
  static constexpr int64_t kColumnBlockBytes = int64_t(4) << 20, kMinBlockPanels = 8;

  int64_t panels;      // column panels: ceil(N / nr)
  int64_t row_panels;  // row panels: ceil(M / kTileRows)
  int64_t tm, tn;      // tasks per matrix along M and N
  int64_t mb, nb;      // most rows (a multiple of kTileRows) and columns (of nr) of a task

  // panel_bytes: the packed B of one column panel, all of K.
  TaskGrid(const Problem& p, int threads, int64_t nr, int64_t panel_bytes) {
    panels = ceil_div(p.N, nr);
    row_panels = ceil_div(p.M, kTileRows);
    int64_t m_tasks = ceil_div(p.M, kRowBlock), n_tasks = 1;
    while (p.batch * m_tasks * n_tasks < kMinTasks) {
      if (ceil_div(p.M, m_tasks + 1) >= kMinRowBlock) {
        ++m_tasks;
      } else if (n_tasks < panels) {
        ++n_tasks;
      } else {
        break;
      }
    }
    while ((p.batch * m_tasks * n_tasks) % threads != 0 && m_tasks < row_panels) ++m_tasks;
    tm = std::min(m_tasks, row_panels);
    nb = ceil_div(panels, n_tasks) * nr;
    const int64_t block_panels = kColumnBlockBytes / panel_bytes;
    if (block_panels >= kMinBlockPanels) nb = std::min(nb, block_panels * nr);
    tn = ceil_div(p.N, nb);
    mb = ceil_div(row_panels, tm) * kTileRows;
  }

  // Caps the columns of a task at `most` (a multiple of nr).
  void cap_columns(int64_t most, int64_t N) {
    nb = std::min(nb, most);
    tn = ceil_div(N, nb);
  }

  int64_t tasks(int64_t batch) const { return batch * tm * tn; }
  // Task t's matrix, row block and column block: column blocks outer.
  int64_t matrix(int64_t t) const { return t / (tm * tn); }
  int64_t row_block(int64_t t) const { return t % (tm * tn) % tm; }
  int64_t column_block(int64_t t) const { return t % (tm * tn) / tm; }

  // The first row of row block r, which row_begin(r + 1) ends: the blocks
  // share the row panels out evenly.
  int64_t row_begin(int64_t r, int64_t M) const {
    return std::min(M, r * row_panels / tm * kTileRows);
  }
};

// a (..., M, K) @ b (..., K, N) in bf16 (cpu/gemm_bf16.cpp).
Tensor bf16_product(const Tensor& a, const Tensor& b);

REPRISE_CPU_END
