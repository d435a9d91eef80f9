// The CPU's bf16 matrix product. Its bits are defined by what AVX512-BF16's
// dot-product instruction, vdpbf16ps, computes (Intel's pseudo-code,
// confirmed on the machine by tests/cpu/bf16_dot_product_test.cpp), so that
// every capability gives the same ones:
//
//   each output's sum, an f32, starts at +0 and takes k in pairs
//   (2p, 2p + 1) in order, a zero padding an odd K; per pair it adds
//   a(2p + 1) b(2p + 1), then a(2p) b(2p), each step one fused multiply-add
//   (a product of two bf16 is exact in f32) rounded to nearest even, with
//   denormal operands read as zero and tiny results flushed to zero as the
//   FPU's flush-to-zero mode flushes them (on Zen 4: tiny before rounding).
//   The sum rounds once to bf16 (nearest even).
//
// avx512_bf16 runs it on vdpbf16ps, two products per f32 lane per
// instruction. Every other capability emulates it on the f32 GEMM's FMA
// kernel (cpu/tile_product.h), with each pair's values widened (exactly)
// and laid out odd element first, under the FPU's denormals-are-zero and
// flush-to-zero modes, which flush as the instruction does: at the f32
// GEMM's speed.
//
// Both pack the same way. A pair word holds a pair's two bf16 bit
// patterns, k = 2p in its low half and 2p + 1 in its high one (the
// instruction's operand layout); the emulation splits each panel of words
// into f32 rows (split_pairs). B is packed once per product into panels
// of NR columns ((pairs, NR) pair words each), A once per task into panels
// of MR rows ((pairs, MR)). Up to kMostPairs pairs of k a tile's sums stay
// in registers over all of K and round once at the end, while its B panel
// and the task's A panels stream from L2. A deeper K (the tied head's
// backward, 49152 deep) is cut into blocks: a block after the first
// reloads the f32 sums the one before left in a scratch tile and carries
// on, so each sum still runs over k in order and rounds once.
#include <bit>
#include <cstring>

#include "cpu/backend.h"
#include "cpu/gemm_problem.h"
#include "cpu/tile_product.h"
#include "cpu/transpose.h"
#include "engine/threads.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

REPRISE_CPU_BEGIN
namespace {

constexpr int64_t MR = kTileRows;
constexpr int NR = kTileCols<float>, L = kLanes<float>, NP = NR / L;

inline uint32_t pair_word(uint16_t even, uint16_t odd) {
  return uint32_t(even) | uint32_t(odd) << 16;
}

// The FPU's denormals-are-zero and flush-to-zero modes, rounding to nearest
// even, on this thread while it lives; the modes before come back after.
class FlushDenormals {
 public:
#if defined(__x86_64__)
  FlushDenormals() : saved_(_mm_getcsr()) {
    constexpr unsigned kDaz = 1u << 6, kFtz = 1u << 15, kRounding = 3u << 13;
    _mm_setcsr((saved_ | kDaz | kFtz) & ~kRounding);
  }
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#elif defined(__aarch64__)
  FlushDenormals() {
    __asm__ volatile("mrs %0, fpcr" : "=r"(saved_));
    constexpr uint64_t kFz = 1u << 24, kRounding = 3u << 22;
    const uint64_t modes = (saved_ | kFz) & ~kRounding;
    __asm__ volatile("msr fpcr, %0" : : "r"(modes));
  }
  ~FlushDenormals() { __asm__ volatile("msr fpcr, %0" : : "r"(saved_)); }

 private:
  uint64_t saved_;
#else
#error "cpu/gemm_bf16.cpp: no denormal flushing for this architecture"
#endif
};

// Packs pair words of `lines` (<= width) lines into dst (K / 2 rounded up,
// width): dst[p * width + r] = the pair word of line r's values 2p and
// 2p + 1 (0 past an odd K), zero for r >= lines. Value k of line r lies at
// src[r * line_stride + k * k_stride]: an A panel's lines are its rows, a B
// panel's its columns.
void pack_pairs(const uint16_t* src, int64_t line_stride, int64_t k_stride, int64_t lines,
                int64_t K, int64_t width, uint32_t* dst) {
  const int64_t full = K / 2, pairs = ceil_div(K, 2);
  auto value = [&](int64_t r, int64_t k) { return src[r * line_stride + k * k_stride]; };
  int64_t p = 0;
  if (line_stride == 1) {  // the lines lie side by side at each k
    for (; p < full; ++p) {
      const uint16_t* even = src + 2 * p * k_stride;
      const uint16_t* odd = even + k_stride;
      uint32_t* out = dst + p * width;
      for (int64_t r = 0; r < lines; ++r) out[r] = pair_word(even[r], odd[r]);
      std::fill(out + lines, out + width, 0u);
    }
  } else if (k_stride == 1 && line_stride % 2 == 0) {
    // Each line's pair words are contiguous 32-bit words: transposed in
    // registers, L lines at a time (as bits: no arithmetic touches them).
    const float* words = reinterpret_cast<const float*>(src);
    for (int64_t g = 0; g < width; g += L) {
      const int64_t n = std::min<int64_t>(L, width - g);
      lines_by_k(words + g * line_stride / 2, line_stride / 2, std::clamp<int64_t>(lines - g, 0, L),
                 full, [&](int64_t q, NativeF32 v) {
                   store_first_native(reinterpret_cast<float*>(dst + q * width + g), v, n);
                 });
    }
    p = full;
  }
  for (; p < pairs; ++p) {  // any other layout, and the last pair of an odd K
    uint32_t* out = dst + p * width;
    for (int64_t r = 0; r < lines; ++r)
      out[r] = pair_word(value(r, 2 * p), 2 * p + 1 < K ? value(r, 2 * p + 1) : 0);
    std::fill(out + lines, out + width, 0u);
  }
}

// A tile's sums, rows [0, rows) and columns [0, cols) of acc, rounded to
// bf16 (cpu/vec.h's round_to_bf16) into c, rows ldc apart.
template <int R>
void store_rounded(const NativeF32 (&acc)[R][NP], int64_t rows, int64_t cols, bfloat16* c,
                   int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < NP && j * L < cols; ++j)
      store_first_bf16(c + r * ldc + j * L, acc[r][j], cols - j * L);
  }
}

// Where a tile's sums go: rows [0, rows) and columns [0, cols) of C (rows
// ldc apart), rounded, or, before the last block of k, carry_out (R x NR
// f32, rows NR apart) unrounded. carry_in: the sums of the blocks before,
// or null for the first.
struct Out {
  bfloat16* c;
  int64_t ldc, rows, cols;
  const float* carry_in;
  float* carry_out;
};

template <int R>
REPRISE_CPU_INLINE void finish(const NativeF32 (&acc)[R][NP], const Out& out) {
  if (out.carry_out == nullptr) return store_rounded<R>(acc, out.rows, out.cols, out.c, out.ldc);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NP; ++j) store_native(out.carry_out + r * NR + j * L, acc[r][j]);
  }
}

// The emulation's panels: each pair word of a (pairs, width) panel split
// into two f32 rows, the odd element's value (the word's high half, exact
// as f32) then the even one's: a (2 * pairs, width) f32 panel whose k
// order is the instruction's.
void split_pairs(const uint32_t* words, int64_t pairs, int64_t width, float* dst) {
  for (int64_t p = 0; p < pairs; ++p) {
    const uint32_t* w = words + p * width;
    float* odd = dst + 2 * p * width;
    float* even = odd + width;
    for (int64_t r = 0; r < width; ++r) {
      odd[r] = std::bit_cast<float>(w[r] & 0xffff0000u);
      even[r] = std::bit_cast<float>(w[r] << 16);
    }
  }
}

// R rows by NR columns of C from a split A panel (2 * pairs, MR) and a
// split B panel (2 * pairs, NR), emulated: the FMA chain over the split k
// order (cpu/tile_product.h's kernel, as the f32 GEMM runs it). The tiles
// are never inlined, so that no FMA moves out of the caller's
// FlushDenormals.
template <int R>
__attribute__((noinline)) void emulated_tile(int64_t pairs, const uint32_t* ap_words,
                                             const uint32_t* bp_words, const Out& out) {
  const auto* ap = reinterpret_cast<const float*>(ap_words);
  const auto* bp = reinterpret_cast<const float*>(bp_words);
  NativeF32 acc[R][NP] = {};
  if (out.carry_in != nullptr) {
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < NP; ++j) acc[r][j] = load_native(out.carry_in + r * NR + j * L);
    }
  }
  tile_fma<float, R, NP>(
      2 * pairs, [ap](int r, int64_t k) { return ap[k * MR + r]; }, bp, NR, acc);
  finish<R>(acc, out);
}

#if defined(REPRISE_CPU_LEVEL_AVX512)
// The same tile on vdpbf16ps: one instruction per row and register of
// columns per pair. Its target is the level's (cpu/level.h) and BF16, so
// that the level's inline helpers may be inlined into it.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,f16c,bmi,bmi2,"
                      "lzcnt,popcnt"),
               noinline)) void
dot_tile(int64_t pairs, const uint32_t* ap, const uint32_t* bp, const Out& out) {
  __m512 acc[R][NP];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NP; ++j) {
      acc[r][j] = out.carry_in != nullptr ? _mm512_loadu_ps(out.carry_in + r * NR + j * L)
                                          : _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bw[NP];
    for (int j = 0; j < NP; ++j) bw[j] = (__m512bh)_mm512_loadu_si512(bp + p * NR + j * L);
    for (int r = 0; r < R; ++r) {
      const __m512bh aw = (__m512bh)_mm512_set1_epi32(int(ap[p * MR + r]));
      for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], aw, bw[j]);
    }
  }
  NativeF32 sums[R][NP];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NP; ++j) sums[r][j] = acc[r][j];
  }
  finish<R>(sums, out);
}
#endif

using Tile = void (*)(int64_t, const uint32_t*, const uint32_t*, const Out&);

// The tiles for full panels and for the short ones at the end of M (and
// for products of a few rows, one token's projections while generating).
// split: the panels are the emulation's (split_pairs), two 32-bit words
// per pair and line.
struct Tiles {
  Tile full, four, one;
  bool split;

  Tile for_rows(int64_t rows) const { return rows > 4 ? full : rows > 1 ? four : one; }
};

Tiles tiles_for_capability() {
#if defined(REPRISE_CPU_LEVEL_AVX512)
  if (cpu_capability() == CpuCapability::avx512_bf16)
    return {dot_tile<int(MR)>, dot_tile<4>, dot_tile<1>, false};
#endif
  return {emulated_tile<int(MR)>, emulated_tile<4>, emulated_tile<1>, true};
}

// Most pairs of k per block, and most columns of a task when k is cut
// into blocks (its scratch tiles: at most kRowBlock x kBlockedColumns f32).
constexpr int64_t kMostPairs = 768;
constexpr int64_t kBlockedColumns = 2048;

struct Plan : TaskGrid {
  int64_t pairs;       // K / 2 rounded up
  int64_t kcp;         // pairs per block of k (the last block may be shorter)
  int64_t blocks;      // blocks of k
  int64_t packed_per;  // packed B per matrix: pairs * panels * NR pair words

  Plan(const Problem& p, int threads)
      : TaskGrid(p, threads, NR, ceil_div(p.K, 2) * NR * int64_t(sizeof(uint32_t))) {
    pairs = ceil_div(p.K, 2);
    blocks = ceil_div(pairs, kMostPairs);
    kcp = ceil_div(pairs, blocks);
    packed_per = pairs * panels * NR;
    if (blocks > 1) cap_columns(kBlockedColumns, p.N);
  }
};

}  // namespace

Tensor bf16_product(const Tensor& a_in, const Tensor& b_in) {
  const ProductShapes shapes = product_shapes(a_in.shape(), b_in.shape());
  Tensor out = Tensor::empty(shapes.out, DType::bf16);
  if (out.numel() == 0) return out;
  if (a_in.size(-1) == 0) return out.zero_();

  NoGradGuard no_grad;  // the views below are plumbing
  const Tensor a = gemm_readable(a_in), b = gemm_readable(b_in);
  const Problem p = problem_of(a, b);
  const auto* pa = static_cast<const uint16_t*>(a.raw_data());
  const auto* pb = static_cast<const uint16_t*>(b.raw_data());
  auto* pc = static_cast<bfloat16*>(out.raw_data());

  const int nt = threads::num_threads();
  const Plan s(p, nt);
  const Tiles tiles = tiles_for_capability();
  const int64_t words = tiles.split ? 2 : 1;  // 32-bit words per pair and line of a panel
  const int64_t tasks = s.tasks(p.batch);
  const int64_t a_size = round_up(s.mb * s.kcp * words, 16);  // one thread's A panels of a block
  // One thread's scratch tiles between blocks of k: MR x NR per tile.
  const int64_t carry_size = s.blocks > 1 ? s.mb * round_up(s.nb, NR) : 0;
  // One thread's pair words of a panel before the emulation splits them.
  const int64_t unsplit_size = tiles.split ? round_up(NR * s.kcp, 16) : 0;
  const bool serial = tasks == 1 || double(p.batch) * p.M * p.N * p.K < kParallelMacs;
  const int workers = serial ? 1 : nt;
  AlignedBuffer<uint32_t> packed(p.batch * s.packed_per * words), a_bufs(workers * a_size);
  AlignedBuffer<uint32_t> unsplit(std::max<int64_t>(1, workers * unsplit_size));
  AlignedBuffer<float> carries(std::max<int64_t>(1, workers * carry_size));

  // A panel of `lines` lines (src as pack_pairs reads it) at dst: pair
  // words, or for the emulation their split f32 rows.
  auto pack = [&](int thread, const uint16_t* src, int64_t line_stride, int64_t k_stride,
                  int64_t lines, int64_t K, int64_t width, int64_t np, uint32_t* dst) {
    if (!tiles.split) return pack_pairs(src, line_stride, k_stride, lines, K, width, dst);
    uint32_t* w = unsplit.data.get() + thread * unsplit_size;
    pack_pairs(src, line_stride, k_stride, lines, K, width, w);
    split_pairs(w, np, width, reinterpret_cast<float*>(dst));
  };

  // Every B panel of every block of the batch: block kb's panels follow
  // each other from pair kb * kcp on, (pairs of the block, NR) each.
  threads::claim_tasks(workers, p.batch * s.blocks * s.panels, [&](int thread, int64_t t) {
    const int64_t bi = t / (s.blocks * s.panels), kb = t / s.panels % s.blocks, pj = t % s.panels;
    const int64_t p0 = kb * s.kcp, np = std::min(s.kcp, s.pairs - p0), j0 = pj * NR;
    const Matrix<uint16_t> bm = matrix_of(p.b, pb, bi);
    const int64_t line_stride = bm.row_major ? 1 : bm.outer, k_stride = bm.row_major ? bm.outer : 1;
    pack(thread, bm.data + j0 * line_stride + 2 * p0 * k_stride, line_stride, k_stride,
         std::min<int64_t>(NR, p.N - j0), std::min(2 * np, p.K - 2 * p0), NR, np,
         packed.data.get() + (bi * s.packed_per + p0 * s.panels * NR + pj * np * NR) * words);
  });
  // Each task, block by block of k: its A panels, then each of its B
  // panels against each of them.
  threads::claim_tasks(workers, tasks, [&](int thread, int64_t t) {
    const FlushDenormals flush;  // for the emulation (vdpbf16ps flushes in any mode)
    const int64_t bi = s.matrix(t), r = s.row_block(t);
    const int64_t i0 = s.row_begin(r, p.M), j0 = s.column_block(t) * s.nb;
    const int64_t m = s.row_begin(r + 1, p.M) - i0, n = std::min(s.nb, p.N - j0);
    const Matrix<uint16_t> am = matrix_of(p.a, pa, bi);
    const int64_t line_stride = am.row_major ? am.outer : 1, k_stride = am.row_major ? 1 : am.outer;
    uint32_t* a_buf = a_bufs.data.get() + thread * a_size;
    float* carry = carries.data.get() + thread * carry_size;
    bfloat16* cm = pc + bi * p.M * p.N;
    for (int64_t kb = 0; kb < s.blocks; ++kb) {
      const int64_t p0 = kb * s.kcp, np = std::min(s.kcp, s.pairs - p0);
      for (int64_t i = 0; i < m; i += MR) {
        pack(thread, am.data + (i0 + i) * line_stride + 2 * p0 * k_stride, line_stride, k_stride,
             std::min<int64_t>(MR, m - i), std::min(2 * np, p.K - 2 * p0), MR, np,
             a_buf + i * np * words);
      }
      const uint32_t* block = packed.data.get() + (bi * s.packed_per + p0 * s.panels * NR) * words;
      for (int64_t j = 0; j < n; j += NR) {
        const uint32_t* bp = block + (j0 + j) / NR * np * NR * words;
        for (int64_t i = 0; i < m; i += MR) {
          const int64_t rows = std::min<int64_t>(MR, m - i);
          float* scratch = carry + (i / MR * round_up(s.nb, NR) / NR + j / NR) * MR * NR;
          const Out out{.c = cm + (i0 + i) * p.N + j0 + j,
                        .ldc = p.N,
                        .rows = rows,
                        .cols = std::min<int64_t>(NR, n - j),
                        .carry_in = kb > 0 ? scratch : nullptr,
                        .carry_out = kb + 1 < s.blocks ? scratch : nullptr};
          tiles.for_rows(rows)(np, a_buf + i * np * words, bp, out);
        }
      }
    }
  });
  return out;
}

REPRISE_CPU_END
