// The CPU GEMM driver: operand layouts, batch folding, and the choice of
// kernel. f32 products run on reprise's own AVX-512 kernel
// (ops/sgemm_avx512.cpp) when the build has it; f64 products, and f32 ones
// on other CPUs or with REPRISE_GEMM=eigen, run tiled on Eigen's
// sequential kernel as below.
//
// Why not `c.noalias() = a * b` on Eigen::Maps: Eigen's product splits itself
// across OpenMP threads and derives its cache blocking (the depth of a
// K-panel) from the thread count, so its bits change with the thread count
// (measured with Eigen 3.4 on f32: 93% of the elements of a 1024^3 product,
// and 93% of a (256 x 2048) @ (2048 x 256) one, differ between 1 and 2
// threads), and its threads spin-wait on each other's packed panels, which
// stalls badly when another process takes a core (a 2-thread (256 x 2048) @
// (2048 x 256) product fell to 4.7 GFLOP/s on a loaded 2-core machine).
//
// So the output C is cut into tiles chosen from the shapes alone, threads
// claim tiles one at a time, and each tile is one call of
// Eigen::internal::general_matrix_matrix_product::run, the sequential kernel
// (panel packing and the vectorised micro-kernel) that Eigen's own product
// calls, with cache blocking computed from the tile's sizes. A tile is thus
// computed the same way whichever thread runs it and however many there are.
// Built with OpenBLAS (REPRISE_BLAS=AUTO finds it, or OPENBLAS), the same
// call is Eigen's EIGEN_USE_BLAS forwarding to sgemm/dgemm, and OpenBLAS is
// kept single-threaded: the tiles are the parallelism.
#include "ops/gemm.h"

// GCC 12 reports a false "may be used uninitialized" inside Eigen's AVX-512
// panel packing (avx512fintrin.h, reached from gemm_pack_rhs<double>).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/error.h"
#include "engine/strided_loop.h"
#include "engine/threads.h"
#include "ops/gemm_problem.h"
#include "ops/sgemm_avx512.h"

#ifdef REPRISE_OPENBLAS
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace reprise::ops::detail {
namespace {

// Tiles of C are at most kTile x kTile: big enough that packing is a small
// share of the work, small enough that big products give many tasks to
// balance. A product with fewer than kMinTasks such tiles over its whole
// batch is cut finer (tile_grid), so that small-batch products still give
// every thread of a small machine work. Edges are multiples of kAlign
// elements (64 bytes of f32), the micro-kernel's row step.
constexpr int64_t kTile = 256;
constexpr int64_t kMinTasks = 8;
constexpr int64_t kAlign = 16;

// The edge near `target` that cuts n into equal tiles: 688 -> 240 240 208.
int64_t even_edge(int64_t n, int64_t target) {
  return std::min(n, round_up(ceil_div(n, ceil_div(n, target)), kAlign));
}

struct Grid {
  int64_t mb, nb;  // tile edges along M and N
};

// The tiles of `batch` (M, N) outputs. Each tile packs its rows of A and its
// columns of B for itself, so a grid of tm x tn tiles packs K (tn M + tm N)
// elements; the kernels pack slowly (a quarter of the time of a 688 x 256 x
// 2048 product cut into 128 x 128 tiles), so when kTile tiles are too few,
// the grid chosen is the one with at least kMinTasks tiles (or the most
// tiles, for a small output) that packs the least: 688 x 256 becomes 4 x 2
// tiles of 176 x 128 rather than 6 x 2 of 128 x 128.
Grid tile_grid(int64_t batch, int64_t M, int64_t N) {
  Grid best{even_edge(M, kTile), even_edge(N, kTile)};
  auto tasks = [&](const Grid& g) {
    return std::min(kMinTasks, batch * ceil_div(M, g.mb) * ceil_div(N, g.nb));
  };
  auto packed = [&](const Grid& g) { return ceil_div(N, g.nb) * M + ceil_div(M, g.mb) * N; };
  if (tasks(best) == kMinTasks) return best;
  for (int64_t tm = 1; tm <= kMinTasks; ++tm) {
    const int64_t tn = ceil_div(kMinTasks, batch * tm);
    const Grid g{even_edge(M, ceil_div(M, tm)), even_edge(N, ceil_div(N, tn))};
    if (tasks(g) > tasks(best) || (tasks(g) == tasks(best) && packed(g) < packed(best))) best = g;
  }
  return best;
}

// The storage order of a (rows, cols) matrix with strides (rs, cs), or false
// when neither fits. A dim of extent 1 may have any stride. The leading
// dimension must cover a row (column), as BLAS requires.
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

// t itself when its matrices (last two dims) have a storage order Eigen's
// kernel reads, else a contiguous copy.
Tensor gemm_readable(const Tensor& t) {
  Layout unused;
  bool ok = matrix_order(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1), unused);
  return ok ? t : t.contiguous();
}

// Element offsets of each matrix of t over the broadcast batch shape
// (row-major order of the batch index; stride 0 along broadcast dims).
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t nb = int64_t(batch.size()), lead = nb - (t.dim() - 2);
  Shape st(batch.size(), 0);
  for (int64_t d = lead; d < nb; ++d) {
    st[d] = t.size(d - lead) == 1 ? 0 : t.stride(d - lead);
  }
  std::vector<int64_t> offsets(size_t(numel(batch)));
  Shape idx(batch.size(), 0);
  for (int64_t& off : offsets) {
    off = 0;
    for (int64_t d = 0; d < nb; ++d) off += idx[d] * st[d];
    for (int64_t d = nb - 1; d >= 0 && ++idx[d] == batch[d]; --d) idx[d] = 0;
  }
  return offsets;
}

template <class T, int AOrder, int BOrder>
void run_tiles(const Problem& p, const T* a, const T* b, T* c) {
  using Gemm = Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, AOrder, false, T,
                                                              BOrder, false, Eigen::RowMajor, 1>;
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic,
                                                        Eigen::Dynamic, Eigen::Dynamic>;
  const Grid grid = tile_grid(p.batch, p.M, p.N);
  const int64_t mb = grid.mb, nb = grid.nb;
  const int64_t tm = ceil_div(p.M, mb), tn = ceil_div(p.N, nb), per_matrix = tm * tn;
  const int64_t tasks = p.batch * per_matrix;

  auto tile = [&](int64_t t) {
    const int64_t bi = t / per_matrix, i0 = (t % per_matrix) / tn * mb, j0 = t % tn * nb;
    const int64_t m = std::min(mb, p.M - i0), n = std::min(nb, p.N - j0);
    T* pc = c + bi * p.M * p.N + i0 * p.N + j0;  // (m, n) tile, leading dim N
    for (int64_t i = 0; i < m; ++i) std::fill_n(pc + i * p.N, n, T(0));
    Blocking blocking(m, n, p.K, 1, true);
    Gemm::run(m, n, p.K, a + p.a.offsets[size_t(bi)] + i0 * p.a_rs, p.a.outer,
              b + p.b.offsets[size_t(bi)] + j0 * p.b_cs, p.b.outer, pc, 1, p.N, T(1), blocking);
  };

  const bool serial = tasks == 1 || double(p.batch) * p.M * p.N * p.K < kParallelMacs;
  threads::claim_tasks(serial ? 1 : threads::num_threads(), tasks,
                       [&](int, int64_t t) { tile(t); });
}

template <class T>
void run(const Problem& p, const T* a, const T* b, T* c) {
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_f32_kernel() == GemmKernel::avx512) return sgemm_avx512(p, a, b, c);
  }
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (p.a.row_major) {
    p.b.row_major ? run_tiles<T, R, R>(p, a, b, c) : run_tiles<T, R, C>(p, a, b, c);
  } else {
    p.b.row_major ? run_tiles<T, C, R>(p, a, b, c) : run_tiles<T, C, C>(p, a, b, c);
  }
}

#ifdef REPRISE_OPENBLAS
// OpenBLAS's own threads would compete with the tile threads.
const bool kBlasSingleThreaded = [] {
  openblas_set_num_threads(1);
  return true;
}();
#endif

}  // namespace

GemmKernel gemm_f32_kernel() {
  static const GemmKernel kernel = [] {
    const char* env = std::getenv("REPRISE_GEMM");
    const std::string choice = env ? env : "";
    const GemmKernel best = sgemm_avx512_built() ? GemmKernel::avx512 : GemmKernel::eigen;
    if (choice.empty() || choice == "auto") return best;
    if (choice == "eigen") return GemmKernel::eigen;
    REPRISE_CHECK(choice == "avx512", "REPRISE_GEMM: expected auto, avx512 or eigen, got '", choice,
                  "'");
    REPRISE_CHECK(sgemm_avx512_built(),
                  "REPRISE_GEMM=avx512: this build has no AVX-512 kernel (its CPU lacks AVX-512F)");
    return GemmKernel::avx512;
  }();
  return kernel;
}

const char* gemm_f32_kernel_name() {
  if (gemm_f32_kernel() == GemmKernel::avx512) return "avx512";
#ifdef REPRISE_OPENBLAS
  return "openblas";
#else
  return "eigen";
#endif
}

Tensor matmul_kernel(const Tensor& a_in, const Tensor& b_in) {
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  const Shape batch_a(a_in.shape().begin(), a_in.shape().end() - 2);
  const Shape batch_b(b_in.shape().begin(), b_in.shape().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, a_in.dtype());
  if (out.numel() == 0) return out;
  if (K == 0) return out.zero_();

  NoGradGuard no_grad;  // the views below are plumbing
  const Tensor a = gemm_readable(a_in), b = gemm_readable(b_in);
  Problem p{
      .batch = numel(batch), .M = M, .N = N, .K = K, .a_rs = a.stride(-2), .b_cs = b.stride(-1)};
  matrix_order(M, K, a.stride(-2), a.stride(-1), p.a);
  matrix_order(K, N, b.stride(-2), b.stride(-1), p.b);

  // With one b for the whole batch, a's batch and row dims fold into one
  // tall matrix when they step uniformly through memory ((B, T, C) @ (C, N)
  // is one (B*T, C) @ (C, N) product): bigger tiles, b packed fewer times.
  Layout folded;
  Shape lead(a.shape().begin(), a.shape().end() - 1),
      lead_st(a.strides().begin(), a.strides().end() - 1);
  StridedLayout<1> rows = coalesce<1>(lead, {lead_st});
  if (p.batch > 1 && numel(batch_b) == 1 && rows.shape.size() == 1 &&
      matrix_order(p.batch * M, K, rows.strides[0][0], a.stride(-1), folded)) {
    p.M = p.batch * M;
    p.batch = 1;
    p.a_rs = rows.strides[0][0];
    p.a = std::move(folded);
  }
  p.a.offsets = p.batch == 1 ? std::vector<int64_t>{0} : batch_offsets(a, batch);
  p.b.offsets = p.batch == 1 ? std::vector<int64_t>{0} : batch_offsets(b, batch);

  dispatch_float(a.dtype(), "matmul",
                 [&]<class T>() { run<T>(p, a.data<T>(), b.data<T>(), out.data<T>()); });
  return out;
}

}  // namespace reprise::ops::detail
