// Fused scaled dot-product attention: forward kernel, backward rule, OpInfo.
//
// B = batch, Hq/Hkv = query/kv heads, G = Hq / Hkv, T = queries, S = keys,
// D = q/k head size, Dv = v head size. Tiles are Br = 64 query rows by
// Bc = 64 keys. W = elements per 64 bytes (16 f32, 8 f64) is the vector
// width of the tile loops.
//
// Forward, per (b, query head h, query block), for each key block:
//   S = scale * Q K^T (masked), m' = max(m, rowmax S), P = exp(S - m'),
//   l = l exp(m - m') + rowsum P,  O = O exp(m - m') + P V,
// then O /= l and lse = m + log l (an auxiliary output kept for backward).
// Backward (FlashAttention-2), with Di = rowsum(dO * O), per tile:
//   P = exp(scale * Q K^T - lse), dV += P^T dO, dP = dO V^T,
//   dS = scale * P * (dP - Di), dK += dS^T Q, dQ += dS K.
// Dropout (p > 0) multiplies P by factors Z regenerated from the op's
// reservation in both passes (see Dropout below).
// Backward accumulates dK and dV of each key block over query heads, then
// query blocks, and dQ of each query block over key blocks, always in that
// order and each sum owned by one task, so no result depends on threads
// (see backward_kernel for the two schedules).
#include "ops/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/tape.h"
#include "engine/threads.h"
#include "ops/elementwise.h"
#include "rng/distributions.h"
#include "rng/generator.h"
#include "rng/words.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

constexpr const char* kOpName = "scaled_dot_product_attention";
constexpr int64_t kBr = 64;  // query rows per tile
constexpr int64_t kBc = 64;  // keys per tile

template <class T>
constexpr int64_t kLanes = 64 / int64_t(sizeof(T));

int64_t ceil_div(int64_t n, int64_t m) { return (n + m - 1) / m; }
int64_t round_up(int64_t n, int64_t m) { return ceil_div(n, m) * m; }

// Tasks per parallel chunk so that a chunk does at least ~2^18 flops: tiny
// problems (gradcheck shapes, T = 1) stay on one thread instead of paying a
// parallel region per call.
int64_t grain_for(double task_flops) {
  return std::max<int64_t>(1, int64_t(double(1 << 18) / std::max(task_flops, 1.0)));
}

// a * b + c, fused where the hardware has an FMA.
inline float madd(float a, float b, float c) {
#ifdef FP_FAST_FMAF
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// exp(x) for x <= 88 in a form the compiler vectorises (libm's expf does
// not): exp(x) = 2^n exp(r) with n = round(x log2 e) and r = x - n ln 2
// split in two parts (Cody-Waite), exp(r) by Cephes' expf polynomial
// (relative error about 1e-7). Underflows to 0 below -87.3; NaN stays NaN.
inline float exp_tile(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float xc = x > -88.0f ? x : -88.0f;    // also maps NaN to a finite value
  xc = xc < 88.0f ? xc : 88.0f;
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = madd(p, r, 1.3981999507e-3f);
  p = madd(p, r, 8.3334519073e-3f);
  p = madd(p, r, 4.1665795894e-2f);
  p = madd(p, r, 1.6666665459e-1f);
  p = madd(p, r, 5.0000001201e-1f);
  p = madd(p, r * r, r + 1.0f);
  const float y = p * std::bit_cast<float>((int32_t(n) + 127) << 23);
  const float z = x < -87.3f ? 0.0f : y;
  return x == x ? z : x;
}
// f64 is the gradcheck and reference type: libm's exp.
inline double exp_tile(double x) { return std::exp(x); }

// The rows of a 4-d tensor (b, h, row, col), with its strides in elements.
template <class T>
struct Rows {
  const T* data;
  int64_t sb, sh, sr, sc;
  const T* at(int64_t b, int64_t h, int64_t r) const { return data + b * sb + h * sh + r * sr; }
};
template <class T>
Rows<T> rows_of(const Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// One 64-byte vector of T, through the GCC/Clang vector extension: the
// compiler lowers it to one AVX-512 register, two AVX2 ones or NEON pairs.
template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <class T>
using Vec = typename VecOf<T>::type;

// Vectors pass by reference: passing or returning a 64-byte vector by value
// has an ABI of its own without AVX-512 (GCC's -Wpsabi).
template <class T>
void load(Vec<T>& v, const T* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class T>
void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

// The tile GEMM: C (M x N) = [C +] A (M x K) B (K x N) with N = nchunks * W.
// B and C rows are contiguous and hold whole W-wide chunks (B is padded);
// A is read one element at a time through strides (am, ak), so a transposed
// A costs nothing. Each C element adds its K products in order whatever the
// blocking, so a tile's result does not depend on where or how it runs.
//
// The micro-kernel keeps an R x NC block of C in R * NC vector registers and
// per k loads NC vectors of B and broadcasts R scalars of A.
template <class T, int R, int NC>
void gemm_micro(int64_t K, const T* A, int64_t am, int64_t ak, const T* Bm, int64_t ldb, T* C,
                int64_t ldc, bool accumulate) {
  using V = Vec<T>;
  constexpr int64_t W = kLanes<T>;
  V acc[R][NC];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < NC; ++c) {
      acc[r][c] = V{};
      if (accumulate) load(acc[r][c], C + r * ldc + c * W);
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    V b[NC];
    for (int c = 0; c < NC; ++c) load(b[c], Bm + k * ldb + c * W);
    for (int r = 0; r < R; ++r) {
      const T a = A[r * am + k * ak];
      for (int c = 0; c < NC; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < NC; ++c) store(C + r * ldc + c * W, acc[r][c]);
  }
}

// All M rows of one NC-chunk column block: R rows at a time, then 4, 2, 1.
template <class T, int R, int NC>
void gemm_rows(int64_t M, int64_t K, const T* A, int64_t am, int64_t ak, const T* Bm, int64_t ldb,
               T* C, int64_t ldc, bool accumulate) {
  int64_t m = 0;
  for (; m + R <= M; m += R)
    gemm_micro<T, R, NC>(K, A + m * am, am, ak, Bm, ldb, C + m * ldc, ldc, accumulate);
  if constexpr (R > 4) {
    if (M - m >= 4) {
      gemm_micro<T, 4, NC>(K, A + m * am, am, ak, Bm, ldb, C + m * ldc, ldc, accumulate);
      m += 4;
    }
  }
  if (M - m >= 2) {
    gemm_micro<T, 2, NC>(K, A + m * am, am, ak, Bm, ldb, C + m * ldc, ldc, accumulate);
    m += 2;
  }
  if (M - m == 1)
    gemm_micro<T, 1, NC>(K, A + m * am, am, ak, Bm, ldb, C + m * ldc, ldc, accumulate);
}

template <class T>
void gemm_tile(int64_t M, int64_t nchunks, int64_t K, const T* A, int64_t am, int64_t ak,
               const T* Bm, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  constexpr int64_t W = kLanes<T>;
  int64_t c = 0;
  for (; c + 4 <= nchunks; c += 4)
    gemm_rows<T, 4, 4>(M, K, A, am, ak, Bm + c * W, ldb, C + c * W, ldc, accumulate);
  if (nchunks - c >= 2) {
    gemm_rows<T, 8, 2>(M, K, A, am, ak, Bm + c * W, ldb, C + c * W, ldc, accumulate);
    c += 2;
  }
  if (nchunks - c == 1)
    gemm_rows<T, 8, 1>(M, K, A, am, ak, Bm + c * W, ldb, C + c * W, ldc, accumulate);
}

// The sum or max of W lanes by halving (lane l with lane l + W/2, ...): a
// dependency chain of log2(W) steps where a running fold has W - 1.
template <class T, class Op>
T fold_lanes(T (&x)[kLanes<T>], Op op) {
  for (int64_t half = kLanes<T> / 2; half > 0; half /= 2) {
    for (int64_t l = 0; l < half; ++l) x[l] = op(x[l], x[l + half]);
  }
  return x[0];
}

// Max of n values (n a multiple of W): W running maxima, then folded.
template <class T>
T row_max(const T* x, int64_t n) {
  constexpr int64_t W = kLanes<T>;
  T acc[W];
  for (int64_t l = 0; l < W; ++l) acc[l] = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; j += W) {
    for (int64_t l = 0; l < W; ++l) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
  }
  return fold_lanes(acc, [](T a, T b) { return a > b ? a : b; });
}

// x[j] = exp(x[j] - shift) over n values (a multiple of W); returns their
// sum (W running sums, then folded).
template <class T>
T exp_shift_sum(T* x, int64_t n, T shift) {
  constexpr int64_t W = kLanes<T>;
  T acc[W] = {};
  for (int64_t j = 0; j < n; j += W) {
    for (int64_t l = 0; l < W; ++l) {
      x[j + l] = exp_tile(x[j + l] - shift);
      acc[l] += x[j + l];
    }
  }
  return fold_lanes(acc, [](T a, T b) { return a + b; });
}

// Scales the first `valid` scores by `scale` and masks the rest of the n
// (a multiple of W) with -inf.
template <class T>
void scale_mask(T* x, int64_t n, int64_t valid, T scale) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) x[j] = j < valid ? x[j] * scale : neg_inf;
}

// How many keys of the block starting at j0 (nj keys) query i sees.
int64_t visible_keys(bool causal, int64_t i, int64_t j0, int64_t nj) {
  return causal ? std::clamp<int64_t>(i - j0 + 1, 0, nj) : nj;
}

struct Dims {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  int64_t group() const { return Hq / Hkv; }
};

Dims dims_of(const Tensor& q, const Tensor& v) {
  return {q.size(0), q.size(1), v.size(1), q.size(2), v.size(2), q.size(3), v.size(3)};
}

// t (B, H, R, C) as a tile-GEMM B operand: rows contiguous and holding a
// multiple of W columns. t itself when it already is one, else a copy with
// rows zero-padded to Cp columns.
Tensor as_b_operand(const Tensor& t, int64_t Cp) {
  if (t.stride(3) == 1 && t.size(3) == Cp) return t;
  Tensor out = Tensor::zeros({t.size(0), t.size(1), t.size(2), Cp}, t.dtype());
  out.slice(3, 0, t.size(3)).copy_(t);
  return out;
}

// t (B, H, S, C) -> (B, H, C, Sp) contiguous, zeros in columns >= S: k^T or
// v^T as a B operand whose columns are keys.
Tensor transpose_padded(const Tensor& t, int64_t Sp) {
  Tensor out = Tensor::zeros({t.size(0), t.size(1), t.size(3), Sp}, t.dtype());
  out.slice(3, 0, t.size(2)).copy_(t.transpose(2, 3));
  return out;
}

// Attention-probability dropout. Weight (b, h, i, j) is kept when word
// ((b Hq + h) T + i) S + j of the reservation is a Bernoulli(1 - p) success
// (rng/distributions.h), and kept weights are scaled by 1 / (1 - p). Backward
// regenerates the same words; nothing is stored.
struct Dropout {
  rng::Reservation words;
  float keep_threshold;  // bernoulli_threshold(1 - p)
  double keep_scale;     // 1 / (1 - p)
};

// z[j] = the dropout factor (0 or 1 / (1 - p)) of keys j0 .. j0 + nj - 1 of
// flat query row `row` (= (b Hq + h) T + i); z[nj .. ncol) = 0.
template <class T>
void dropout_factors(const Dropout& dr, int64_t S, int64_t row, int64_t j0, int64_t nj,
                     int64_t ncol, uint32_t* words, T* z) {
  rng::generate_words(dr.words.seed, dr.words.subsequence,
                      dr.words.offset + uint64_t(row) * uint64_t(S) + uint64_t(j0), words,
                      size_t(nj));
  const T keep = T(dr.keep_scale);
  for (int64_t j = 0; j < nj; ++j) z[j] = rng::bernoulli(words[j], dr.keep_threshold) ? keep : T(0);
  for (int64_t j = nj; j < ncol; ++j) z[j] = T(0);
}

// ---- forward ---------------------------------------------------------------

template <class T>
void forward_kernel(const Dims& d, const Rows<T>& q, const T* kt, int64_t Sp, const Rows<T>& vb,
                    int64_t Dvp, T scale, bool causal, const Dropout* drop, T* out, T* lse) {
  constexpr int64_t W = kLanes<T>;
  const int64_t nqb = ceil_div(d.T, kBr);
  const double task_flops = 2.0 * double(std::min(kBr, d.T) * d.S * (d.D + d.Dv));
  threads::parallel_for(d.B * d.Hq * nqb, grain_for(task_flops), [&](int64_t w0, int64_t w1) {
    std::vector<T> s(kBr * kBc), o(kBr * Dvp), m(kBr), l(kBr);  // scores, output, max, sum
    std::vector<T> z(drop ? kBc : 0);                           // dropout factors of a row
    std::vector<uint32_t> words(drop ? kBc : 0);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / (d.Hq * nqb), h = w / nqb % d.Hq, g = h / d.group();
      const int64_t i0 = w % nqb * kBr, nr = std::min(kBr, d.T - i0);
      const int64_t row0 = (b * d.Hq + h) * d.T + i0;
      const int64_t kend = causal ? std::min(d.S, i0 + nr) : d.S;  // later blocks fully masked
      const T* qrow = q.at(b, h, i0);
      const T* ktg = kt + (b * d.Hkv + g) * d.D * Sp;  // (D, Sp)
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(l.begin(), l.end(), T(0));
      std::fill(o.begin(), o.end(), T(0));
      for (int64_t j0 = 0; j0 < kend; j0 += kBc) {
        const int64_t nj = std::min(kBc, kend - j0), nch = ceil_div(nj, W), ncol = nch * W;
        gemm_tile(nr, nch, d.D, qrow, q.sr, q.sc, ktg + j0, Sp, s.data(), kBc, false);
        for (int64_t r = 0; r < nr; ++r) {
          T* row = s.data() + r * kBc;
          scale_mask(row, ncol, visible_keys(causal, i0 + r, j0, nj), scale);
          // Key 0 is in every row's first block, so m_new is finite from then on.
          const T m_new = std::max(m[r], row_max(row, ncol));
          const T alpha = std::exp(m[r] - m_new);
          l[r] = l[r] * alpha + exp_shift_sum(row, ncol, m_new);  // l sums undropped weights
          m[r] = m_new;
          if (alpha != T(1)) {
            T* orow = o.data() + r * Dvp;
            for (int64_t c = 0; c < Dvp; ++c) orow[c] *= alpha;
          }
          if (drop) {
            dropout_factors(*drop, d.S, row0 + r, j0, nj, ncol, words.data(), z.data());
            for (int64_t j = 0; j < ncol; ++j) row[j] *= z[j];
          }
        }
        gemm_tile(nr, Dvp / W, nj, s.data(), kBc, int64_t(1), vb.at(b, g, j0), vb.sr, o.data(), Dvp,
                  true);
      }
      for (int64_t r = 0; r < nr; ++r) {
        T* dst = out + (row0 + r) * d.Dv;
        for (int64_t c = 0; c < d.Dv; ++c) dst[c] = o[r * Dvp + c] / l[r];
        lse[row0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// q (B, Hq, T, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv) -> {out (B, Hq, T, Dv),
// lse (B, Hq, T)}.
Tensors sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                     const Dropout* drop) {
  const Dims d = dims_of(q, v);
  Tensor out = Tensor::empty({d.B, d.Hq, d.T, d.Dv}, q.dtype());
  Tensor lse = Tensor::empty({d.B, d.Hq, d.T}, q.dtype());
  dispatch_float(q.dtype(), kOpName, [&]<class T>() {
    const int64_t Sp = round_up(d.S, kLanes<T>), Dvp = round_up(d.Dv, kLanes<T>);
    Tensor kt = transpose_padded(k, Sp);
    Tensor vb = as_b_operand(v, Dvp);
    forward_kernel<T>(d, rows_of<T>(q), kt.data<T>(), Sp, rows_of<T>(vb), Dvp, T(scale), causal,
                      drop, out.data<T>(), lse.data<T>());
  });
  return {out, lse};
}

// ---- backward --------------------------------------------------------------

// Everything one backward task reads. A operands (q, dO) keep their strides;
// B operands are padded (qb, kb, dob); kt and vt are transposed and padded.
template <class T>
struct BackwardArgs {
  Dims d;
  T scale;
  bool causal;
  const Dropout* drop;
  int64_t Sp, Dp, Dvp;
  Rows<T> q, qb, kb, dout, dob;
  const T* kt;     // (B, Hkv, D, Sp)
  const T* vt;     // (B, Hkv, Dv, Sp)
  const T* lse;    // (B, Hq, T)
  const T* delta;  // (B, Hq, T): Di = rowsum(dO * O)
  T* dq;           // (B, Hq, T, Dp), zeroed; null when dq is not needed
  T* dk;           // (B, Hkv, S, D); null when dk is not needed
  T* dv;           // (B, Hkv, S, Dv)
};

// Scratch tiles of one backward thread: p the probabilities, ds dP then dS;
// with dropout, z the factors and pz = P * Z.
template <class T>
struct BackwardScratch {
  std::vector<T> p, ds, z, pz;
  std::vector<uint32_t> words;
  explicit BackwardScratch(bool dropout)
      : p(kBr * kBc),
        ds(kBr * kBc),
        z(dropout ? kBr * kBc : 0),
        pz(dropout ? kBr * kBc : 0),
        words(dropout ? kBc : 0) {}
};

// One tile: query block i0 of head h against key block j0 of its kv head.
// Computes dS, then adds (P Z)^T dO to dv_acc, dS^T Q to dk_acc (the key
// block's Bc rows, Dvp and Dp wide) and dS K to dq (the query block's rows),
// each skipped when null.
//
// With dropout factors Z, O = (P * Z) V, so dV = (P * Z)^T dO and the
// gradient reaching P is Z * (dO V^T); Di = rowsum(dO * O) still equals
// rowsum(P * dP), so dS = P * (Z * (dO V^T) - Di).
template <class T>
void backward_tile(const BackwardArgs<T>& a, BackwardScratch<T>& s, int64_t b, int64_t h,
                   int64_t i0, int64_t j0, T* dk_acc, T* dv_acc, T* dq) {
  constexpr int64_t W = kLanes<T>;
  const Dims& d = a.d;
  const int64_t g = h / d.group(), nr = std::min(kBr, d.T - i0), row0 = (b * d.Hq + h) * d.T + i0;
  const int64_t nj = std::min(kBc, d.S - j0), nch = ceil_div(nj, W), ncol = nch * W;
  const T* ktg = a.kt + (b * d.Hkv + g) * d.D * a.Sp;   // (D, Sp)
  const T* vtg = a.vt + (b * d.Hkv + g) * d.Dv * a.Sp;  // (Dv, Sp)
  T* p = s.p.data();
  T* ds = s.ds.data();
  gemm_tile(nr, nch, d.D, a.q.at(b, h, i0), a.q.sr, a.q.sc, ktg + j0, a.Sp, p, kBc, false);
  for (int64_t r = 0; r < nr; ++r) {
    T* row = p + r * kBc;
    const int64_t valid = visible_keys(a.causal, i0 + r, j0, nj);
    const T shift = a.lse[row0 + r];
    for (int64_t j = 0; j < ncol; ++j)
      row[j] = j < valid ? exp_tile(row[j] * a.scale - shift) : T(0);
    if (a.drop) {
      T* zr = s.z.data() + r * kBc;
      dropout_factors(*a.drop, d.S, row0 + r, j0, nj, ncol, s.words.data(), zr);
      if (dv_acc) {
        for (int64_t j = 0; j < ncol; ++j) s.pz[r * kBc + j] = row[j] * zr[j];
      }
    }
  }
  if (dv_acc) {  // A = (P Z)^T, read through strides (1, Bc)
    gemm_tile(nj, a.Dvp / W, nr, a.drop ? s.pz.data() : p, int64_t(1), kBc, a.dob.at(b, h, i0),
              a.dob.sr, dv_acc, a.Dvp, true);
  }
  gemm_tile(nr, nch, d.Dv, a.dout.at(b, h, i0), a.dout.sr, a.dout.sc, vtg + j0, a.Sp, ds, kBc,
            false);
  for (int64_t r = 0; r < nr; ++r) {
    const T* prow = p + r * kBc;
    T* row = ds + r * kBc;
    const T di = a.delta[row0 + r];
    if (a.drop) {
      const T* zr = s.z.data() + r * kBc;
      for (int64_t j = 0; j < ncol; ++j) row[j] = prow[j] * (row[j] * zr[j] - di) * a.scale;
    } else {
      for (int64_t j = 0; j < ncol; ++j) row[j] = prow[j] * (row[j] - di) * a.scale;
    }
  }
  if (dk_acc) {
    gemm_tile(nj, a.Dp / W, nr, ds, int64_t(1), kBc, a.qb.at(b, h, i0), a.qb.sr, dk_acc, a.Dp,
              true);
  }
  if (dq)
    gemm_tile(nr, a.Dp / W, nj, ds, kBc, int64_t(1), a.kb.at(b, g, j0), a.kb.sr, dq, a.Dp, true);
}

// dK and dV of key block j0 of (b, kv head g), summed over its query heads
// and query blocks in order; with_dq also adds each tile's dS K to dQ.
template <class T>
void key_block(const BackwardArgs<T>& a, BackwardScratch<T>& s, std::vector<T>& dk_acc,
               std::vector<T>& dv_acc, int64_t b, int64_t g, int64_t j0, bool with_dq) {
  const Dims& d = a.d;
  std::fill(dk_acc.begin(), dk_acc.end(), T(0));
  std::fill(dv_acc.begin(), dv_acc.end(), T(0));
  for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
    // Causal: queries before j0 see nothing of this block (kBr == kBc).
    for (int64_t i0 = a.causal ? j0 : 0; i0 < d.T; i0 += kBr) {
      T* dq = with_dq && a.dq ? a.dq + ((b * d.Hq + h) * d.T + i0) * a.Dp : nullptr;
      backward_tile(a, s, b, h, i0, j0, a.dk ? dk_acc.data() : nullptr, dv_acc.data(), dq);
    }
  }
  const int64_t key0 = (b * d.Hkv + g) * d.S + j0, nj = std::min(kBc, d.S - j0);
  for (int64_t j = 0; j < nj; ++j) {
    if (a.dk) std::copy_n(dk_acc.data() + j * a.Dp, d.D, a.dk + (key0 + j) * d.D);
    std::copy_n(dv_acc.data() + j * a.Dvp, d.Dv, a.dv + (key0 + j) * d.Dv);
  }
}

// Two schedules with the same sums. With at least as many (b, kv head)
// pairs as threads, one task per pair does everything: it owns dK and dV
// of its kv head and dQ of its query heads. With fewer, dK and dV run one
// task per key block, and dQ one task per query block that recomputes its
// tiles (about 40% more work, all threads busy); it adds the same tiles' dS K
// in the same key order as the first schedule, so the bits do not change.
template <class T>
void backward_kernel(const BackwardArgs<T>& a) {
  const Dims& d = a.d;
  const int64_t nkb = ceil_div(d.S, kBc), nqb = ceil_div(d.T, kBr);
  const bool per_head = d.B * d.Hkv >= threads::num_threads();
  const int64_t tasks = per_head ? d.B * d.Hkv : d.B * d.Hkv * nkb;
  // About 4 tile products of 2 (D + Dv) flops per (query, key) pair.
  const double pair_flops = 4.0 * double(d.D + d.Dv);
  const double task_flops =
      pair_flops * double(d.group() * d.T) * double(per_head ? d.S : std::min(kBc, d.S));
  threads::parallel_for(tasks, grain_for(task_flops), [&](int64_t w0, int64_t w1) {
    BackwardScratch<T> s(a.drop != nullptr);
    std::vector<T> dk_acc(kBc * a.Dp), dv_acc(kBc * a.Dvp);
    for (int64_t w = w0; w < w1; ++w) {
      if (per_head) {
        for (int64_t j0 = 0; j0 < d.S; j0 += kBc)
          key_block(a, s, dk_acc, dv_acc, w / d.Hkv, w % d.Hkv, j0, true);
      } else {
        key_block(a, s, dk_acc, dv_acc, w / nkb / d.Hkv, w / nkb % d.Hkv, w % nkb * kBc, false);
      }
    }
  });
  if (per_head || !a.dq) return;
  const double dq_task_flops = pair_flops * double(std::min(kBr, d.T) * d.S);
  threads::parallel_for(d.B * d.Hq * nqb, grain_for(dq_task_flops), [&](int64_t w0, int64_t w1) {
    BackwardScratch<T> s(a.drop != nullptr);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / (d.Hq * nqb), h = w / nqb % d.Hq, i0 = w % nqb * kBr;
      // The tiles key_block visits: causal ones only where j0 <= i0.
      const int64_t kend = a.causal ? std::min(d.S, i0 + 1) : d.S;
      T* dq = a.dq + ((b * d.Hq + h) * d.T + i0) * a.Dp;
      for (int64_t j0 = 0; j0 < kend; j0 += kBc)
        backward_tile<T>(a, s, b, h, i0, j0, nullptr, nullptr, dq);
    }
  });
}

// Di = rowsum(dO * O) per query row. dout, out: (B, Hq, T, Dv) -> (B, Hq, T).
template <class T>
Tensor row_dot(const Dims& d, const Rows<T>& dout, const Tensor& out) {
  Tensor delta = Tensor::empty({d.B, d.Hq, d.T}, out.dtype());
  const Rows<T> o = rows_of<T>(out);
  T* dst = delta.data<T>();
  threads::parallel_for(d.B * d.Hq * d.T, grain_for(2.0 * double(d.Dv)),
                        [&](int64_t r0, int64_t r1) {
                          for (int64_t r = r0; r < r1; ++r) {
                            const int64_t b = r / (d.Hq * d.T), h = r / d.T % d.Hq, i = r % d.T;
                            const T* x = dout.at(b, h, i);
                            const T* y = o.at(b, h, i);
                            T s = 0;
                            for (int64_t c = 0; c < d.Dv; ++c) s += x[c * dout.sc] * y[c * o.sc];
                            dst[r] = s;
                          }
                        });
  return delta;
}

// Gradients {dq, dk, dv}; dq and dk stay undefined when not needed.
Tensors sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                      const Tensor& lse, const Tensor& dout, double scale, bool causal,
                      const Dropout* drop, bool need_dq, bool need_dk) {
  const Dims d = dims_of(q, v);
  Tensors grads(3);
  dispatch_float(q.dtype(), kOpName, [&]<class T>() {
    constexpr int64_t W = kLanes<T>;
    BackwardArgs<T> a{.d = d, .scale = T(scale), .causal = causal, .drop = drop};
    a.Sp = round_up(d.S, W);
    a.Dp = round_up(d.D, W);
    a.Dvp = round_up(d.Dv, W);
    Tensor kt = transpose_padded(k, a.Sp), vt = transpose_padded(v, a.Sp);
    Tensor qb = need_dk ? as_b_operand(q, a.Dp) : q;
    Tensor kb = need_dq ? as_b_operand(k, a.Dp) : k;
    Tensor dob = as_b_operand(dout, a.Dvp);
    Tensor lse_c = lse.contiguous();
    Tensor delta = row_dot<T>(d, rows_of<T>(dout), out);
    Tensor dq = need_dq ? Tensor::zeros({d.B, d.Hq, d.T, a.Dp}, q.dtype()) : Tensor();
    if (need_dk) grads[1] = Tensor::empty(k.shape(), k.dtype());
    grads[2] = Tensor::empty(v.shape(), v.dtype());
    a.q = rows_of<T>(q);
    a.qb = rows_of<T>(qb);
    a.kb = rows_of<T>(kb);
    a.dout = rows_of<T>(dout);
    a.dob = rows_of<T>(dob);
    a.kt = kt.data<T>();
    a.vt = vt.data<T>();
    a.lse = lse_c.data<T>();
    a.delta = delta.data<T>();
    a.dq = need_dq ? dq.data<T>() : nullptr;
    a.dk = need_dk ? grads[1].data<T>() : nullptr;
    a.dv = grads[2].data<T>();
    backward_kernel(a);
    if (need_dq) grads[0] = a.Dp == d.D ? dq : dq.slice(3, 0, d.D).contiguous();
  });
  return grads;
}

// ---- op --------------------------------------------------------------------

// Both tile products: 2 T S D for Q K^T and 2 T S Dv for P V per (b, h).
// Causal attention skips about half of them; the cost is the dense count.
double sdpa_flops(const Tensors& in, const Tensors&) {
  const Dims d = dims_of(in[0], in[2]);
  return 2.0 * double(d.B * d.Hq) * double(d.T) * double(d.S) * double(d.D + d.Dv);
}

const autograd::OpInfo kSdpa{.name = "sdpa", .flops = sdpa_flops};
const autograd::OpInfo kSdpaDropout{.name = "sdpa_dropout", .is_random = true, .flops = sdpa_flops};

std::string describe_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  return "q " + q.describe() + ", k " + k.describe() + ", v " + v.describe();
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt) {
  REPRISE_CHECK(q.defined() && k.defined() && v.defined(), kOpName, ": undefined input");
  detail::check_float_cpu(kOpName, q);
  detail::check_same_dtype_device(kOpName, q, k);
  detail::check_same_dtype_device(kOpName, q, v);
  const std::string shapes = describe_inputs(q, k, v);
  REPRISE_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOpName,
                ": expected q (B, Hq, T, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv), got ", shapes);
  REPRISE_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), kOpName,
                ": batch sizes differ: ", shapes);
  REPRISE_CHECK(v.size(1) == k.size(1) && v.size(2) == k.size(2), kOpName,
                ": k and v must agree in heads and length (B, Hkv, S), got ", shapes);
  REPRISE_CHECK(k.size(3) == q.size(3), kOpName, ": q and k head sizes D differ: ", shapes);
  REPRISE_CHECK(k.size(1) >= 1 && q.size(1) % k.size(1) == 0, kOpName,
                ": query heads Hq must be a multiple of kv heads Hkv, got ", shapes);
  REPRISE_CHECK(k.size(2) >= 1, kOpName, ": no keys (S = 0): ", shapes);
  REPRISE_CHECK(q.size(3) >= 1 && v.size(3) >= 1, kOpName, ": empty head size: ", shapes);
  REPRISE_CHECK(!opt.scale || std::isfinite(*opt.scale), kOpName, ": scale must be finite, got ",
                opt.scale.value_or(0.0));
  REPRISE_CHECK(opt.dropout_p >= 0.0 && opt.dropout_p < 1.0, kOpName,
                ": dropout_p must lie in [0, 1), got ", opt.dropout_p);
}

// The dropout of a forward or replay: p and the words it was given, which
// must cover every (b, h, i, j).
Dropout dropout_of(double p, const rng::Reservation* r, const Tensor& q, const Tensor& k) {
  const uint64_t need = sdpa_dropout_words(q.size(0), q.size(1), q.size(2), k.size(2));
  REPRISE_CHECK(r != nullptr && r->count >= need, kOpName, ": dropout_p = ", p, " needs ", need,
                " random words (B Hq T S) for q ", q.describe(), ", k ", k.describe(), ", got ",
                r ? rng::to_string(*r) : std::string("no reservation"));
  return {*r, rng::bernoulli_threshold(1.0 - p), 1.0 / (1.0 - p)};
}

}  // namespace

uint64_t sdpa_dropout_words(int64_t B, int64_t Hq, int64_t T, int64_t S) {
  return rng::bernoulli_words(uint64_t(B) * uint64_t(Hq) * uint64_t(T) * uint64_t(S));
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  check_inputs(q, k, v, options);
  const double scale = options.scale.value_or(1.0 / std::sqrt(double(q.size(3))));
  const bool causal = options.causal;
  const double p = options.dropout_p;
  std::optional<rng::Reservation> words;
  if (p > 0) {
    if (options.dropout_rng) {
      words = options.dropout_rng;
    } else {
      rng::Generator& gen = options.generator ? *options.generator : rng::default_generator();
      words = gen.reserve(options.dropout_stream,
                          sdpa_dropout_words(q.size(0), q.size(1), q.size(2), k.size(2)));
    }
  }
  return autograd::record_one({
      .op = p > 0 ? kSdpaDropout : kSdpa,
      .inputs = {q, k, v},
      // Replay passes the recorded reservation (or, on purpose, another one) as r.
      .forward =
          [scale, causal, p](const Tensors& in, const rng::Reservation* r) {
            if (p == 0) return sdpa_forward(in[0], in[1], in[2], scale, causal, nullptr);
            const Dropout drop = dropout_of(p, r, in[0], in[1]);
            return sdpa_forward(in[0], in[1], in[2], scale, causal, &drop);
          },
      .backward =
          [scale, causal, p](Node& node, const Tensors& g) {
            const Tensor q = node.saved_input(0), k = node.saved_input(1);
            std::optional<Dropout> drop;
            if (p > 0) drop = dropout_of(p, node.rng ? &*node.rng : nullptr, q, k);
            return sdpa_backward(q, k, node.saved_input(2), node.saved_output(0),
                                 node.saved_output(1), g[0], scale, causal, drop ? &*drop : nullptr,
                                 node.needs_input_grad(0), node.needs_input_grad(1));
          },
      .save = {.inputs = {0, 1, 2}, .outputs = {0, 1}},
      .num_public_outputs = 1,
      .rng = words,
  });
}

}  // namespace reprise::ops
