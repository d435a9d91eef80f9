// Fused scaled dot-product attention on the CPU, forward and backward.
//
// B = batch, Hq/Hkv = query/kv heads, G = Hq / Hkv, T = queries, S = keys,
// D = q/k head size, Dv = v head size. Tiles are Br = 64 query rows by
// Bc = 64 keys; tile rows are padded to multiples of 16 columns (V16).
//
// Forward, per (b, query head h, query block), for each key block:
//   S = scale * Q K^T (masked), m' = max(m, rowmax S), P = exp(S - m'),
//   l = l exp(m - m') + rowsum P,  O = O exp(m - m') + P V,
// then, with attention sinks, the head's sink as one more key without a
// value (add_sink), and O /= l and lse = m + log l (an auxiliary output kept
// for backward; P = exp(S - lse) then leaves the sink's share out).
// Backward (FlashAttention-2), with Di = rowsum(dO * O), per tile:
//   P = exp(scale * Q K^T - lse), dV += P^T dO, dP = dO V^T,
//   dS = scale * P * (dP - Di), dK += dS^T Q, dQ += dS K.
// Dropout (p > 0) multiplies P by factors Z regenerated from the op's
// reservation in both passes (see Dropout below).
// Backward accumulates dK and dV of each key block over query heads, then
// query blocks, and dQ of each query block over key blocks, always in that
// order and each sum owned by one task, so no result depends on threads
// (see backward_kernel for the two schedules). Tiles that none of their
// queries sees (past the causal bound, before the window) are skipped in
// every pass: they would add only zeros, and a window W costs O(T W), not
// O(T S). The tile products are cpu/tile_product.h's, the exponentials
// engine/functors.h's, the row reductions cpu/rows.h's: every CPU
// capability gives the same bits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "cpu/backend.h"
#include "cpu/philox.h"
#include "cpu/rows.h"
#include "cpu/tile_product.h"
#include "engine/threads.h"
#include "rng/distributions.h"

REPRISE_CPU_BEGIN
namespace {

constexpr int64_t kBr = 64;                  // query rows per tile
constexpr int64_t kBc = kAttentionKeyBlock;  // keys per tile

constexpr int64_t W = 16;  // tile rows hold whole V16s

// Tasks per parallel chunk so that a chunk does at least ~2^18 flops: tiny
// problems (gradcheck shapes, T = 1) stay on one thread instead of paying a
// parallel region per call.
int64_t grain_for(double task_flops) {
  return std::max<int64_t>(1, int64_t(double(1 << 18) / std::max(task_flops, 1.0)));
}

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

// The largest of n values (n a multiple of W).
template <class T>
T tile_row_max(const T* x, int64_t n) {
  V16<T> acc = V16<T>::splat(-std::numeric_limits<T>::infinity());
  for (int64_t j = 0; j < n; j += W) acc = vmax(V16<T>::load(x + j), acc);
  return fold_max(acc);
}

// x[j] = exp(x[j] - shift) over n values (a multiple of W); returns their
// sum.
template <class T>
T exp_shift_sum(T* x, int64_t n, T shift) {
  const V16<T> s = V16<T>::splat(shift);
  V16<T> acc = V16<T>::splat(0);
  for (int64_t j = 0; j < n; j += W) {
    const V16<T> e = exp_of(V16<T>::load(x + j) - s);
    e.store(x + j);
    acc = acc + e;
  }
  return fold_sum(acc);
}

// The keys [first, end) of a tile row that its query sees.
struct KeyRange {
  int64_t first, end;
};

// Lanes l with first <= l < end.
template <class T>
REPRISE_CPU_INLINE M16<T> lanes_between(int64_t first, int64_t end) {
  T index[W];
  for (int l = 0; l < W; ++l) index[l] = T(l);
  const V16<T> lane = V16<T>::load(index);
  return (lane >= V16<T>::splat(double(first))) & (lane < V16<T>::splat(double(end)));
}

// Scales the scores in `keys` by `scale` and masks the rest of the n (a
// multiple of W) with -inf.
template <class T>
void scale_mask(T* x, int64_t n, KeyRange keys, T scale) {
  const V16<T> s = V16<T>::splat(scale), neg_inf = V16<T>::splat(-INFINITY);
  for (int64_t j = 0; j < n; j += W) {
    select(lanes_between<T>(keys.first - j, keys.end - j), V16<T>::load(x + j) * s, neg_inf)
        .store(x + j);
  }
}

// x[j] = exp(x[j] * scale - shift) for the j in `keys` of n values (a
// multiple of W), 0 for the rest: a tile's probabilities from its scores.
template <class T>
void probabilities(T* x, int64_t n, KeyRange keys, T scale, T shift) {
  const V16<T> s = V16<T>::splat(scale), sh = V16<T>::splat(shift), zero = V16<T>::splat(0);
  for (int64_t j = 0; j < n; j += W) {
    const V16<T> e = exp_of(V16<T>::load(x + j) * s - sh);
    select(lanes_between<T>(keys.first - j, keys.end - j), e, zero).store(x + j);
  }
}

// Which keys query i sees: under a causal mask j <= i + off, and with a
// window also j > i + off - window.
struct Mask {
  bool causal;
  int64_t off;     // causal offset
  int64_t window;  // 0: none

  // The first key query i sees.
  int64_t first_key(int64_t i) const {
    return window > 0 ? std::max<int64_t>(0, i + off - window + 1) : 0;
  }
  // The keys of the block starting at j0 (nj keys) query i sees, from j0.
  KeyRange visible(int64_t i, int64_t j0, int64_t nj) const {
    return {std::clamp<int64_t>(first_key(i) - j0, 0, nj),
            causal ? std::clamp<int64_t>(i + off - j0 + 1, 0, nj) : nj};
  }
  // Whether the window of query block i0 reaches key block j0: its first
  // query's window starts before the block ends (later ones start later).
  // Every pass visits exactly the tiles where this holds and j0 < i0 + Br +
  // off (causal), so each dQ sums the same tiles in both schedules.
  bool reaches(int64_t i0, int64_t j0) const { return first_key(i0) < j0 + kBc; }
  // The first key block query block i0 reaches.
  int64_t first_block(int64_t i0) const { return first_key(i0) / kBc * kBc; }
};

struct Dims {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  int64_t group() const { return Hq / Hkv; }
};

Dims dims_of(const Tensor& q, const Tensor& v) {
  return {q.size(0), q.size(1), v.size(1), q.size(2), v.size(2), q.size(3), v.size(3)};
}

// t (B, H, R, C) as a tile-GEMM B operand of `dtype` (the compute dtype; a
// 16-bit t widens as it is copied): rows contiguous and holding a multiple
// of W columns. t itself when it already is one, else a copy with rows
// zero-padded to Cp columns.
Tensor as_b_operand(const Tensor& t, int64_t Cp, DType dtype) {
  if (t.dtype() == dtype && t.stride(3) == 1 && t.size(3) == Cp) return t;
  Tensor out = Tensor::zeros({t.size(0), t.size(1), t.size(2), Cp}, dtype);
  out.slice(3, 0, t.size(3)).copy_(t);
  return out;
}

// t (B, H, S, C) -> (B, H, C, Sp) of `dtype`, contiguous, zeros in columns
// >= S: k^T or v^T as a B operand whose columns are keys.
Tensor transpose_padded(const Tensor& t, int64_t Sp, DType dtype) {
  Tensor out = Tensor::zeros({t.size(0), t.size(1), t.size(3), Sp}, dtype);
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

  explicit Dropout(const AttentionDropout& d)
      : words(d.words),
        keep_threshold(rng::bernoulli_threshold(1.0 - d.p)),
        keep_scale(1.0 / (1.0 - d.p)) {}
};

// z[j] = the dropout factor (0 or 1 / (1 - p)) of keys j0 .. j0 + nj - 1 of
// flat query row `row` (= (b Hq + h) T + i); z[nj .. ncol) = 0.
template <class T>
void dropout_factors(const Dropout& dr, int64_t S, int64_t row, int64_t j0, int64_t nj,
                     int64_t ncol, uint32_t* words, T* z) {
  generate_words(dr.words.seed, dr.words.subsequence,
                 dr.words.offset + uint64_t(row) * uint64_t(S) + uint64_t(j0), words, size_t(nj));
  const T keep = T(dr.keep_scale);
  for (int64_t j = 0; j < nj; ++j) z[j] = rng::bernoulli(words[j], dr.keep_threshold) ? keep : T(0);
  for (int64_t j = nj; j < ncol; ++j) z[j] = T(0);
}

// ---- forward ---------------------------------------------------------------

// A sink (AttentionParams::sinks) as the row's last key, with no value:
// m' = max(m, sink), l = l exp(m - m') + exp(sink - m'), O = O exp(m - m').
template <class T>
void add_sink(T sink, T& m, T& l, T* o, int64_t Dvp) {
  const T m_new = std::max(m, sink);
  const T alpha = fn::exp_of(m - m_new);
  l = l * alpha + fn::exp_of(sink - m_new);
  m = m_new;
  if (alpha != T(1)) {
    for (int64_t c = 0; c < Dvp; ++c) o[c] *= alpha;
  }
}

// Computes in T; writes the output as O (T, or a 16-bit type: rounded once).
template <class T, class O>
void forward_kernel(const Dims& d, const Rows<T>& q, const T* kt, int64_t Sp, const Rows<T>& vb,
                    int64_t Dvp, T scale, const Mask& mask, const Dropout* drop, const T* sinks,
                    O* out, T* lse) {
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
      const int64_t kend = mask.causal ? std::min(d.S, i0 + nr + mask.off) : d.S;  // later masked
      const T* qrow = q.at(b, h, i0);
      const T* ktg = kt + (b * d.Hkv + g) * d.D * Sp;  // (D, Sp)
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(l.begin(), l.end(), T(0));
      std::fill(o.begin(), o.end(), T(0));
      for (int64_t j0 = mask.first_block(i0); j0 < kend; j0 += kBc) {
        const int64_t nj = std::min(kBc, kend - j0), nch = ceil_div(nj, W), ncol = nch * W;
        strided_product(nr, ncol, d.D, qrow, q.sr, q.sc, ktg + j0, Sp, s.data(), kBc, false);
        for (int64_t r = 0; r < nr; ++r) {
          T* row = s.data() + r * kBc;
          scale_mask(row, ncol, mask.visible(i0 + r, j0, nj), scale);
          // m_new stays -inf only while a row's window has not begun (without
          // a window key 0 is in every row's first block): shifting by 0 then
          // keeps its weights, l and O at 0, where -inf - -inf would be NaN.
          const T m_new = std::max(m[r], tile_row_max(row, ncol));
          const T shift = m_new == -std::numeric_limits<T>::infinity() ? T(0) : m_new;
          const T alpha = fn::exp_of(m[r] - shift);
          l[r] = l[r] * alpha + exp_shift_sum(row, ncol, shift);  // l sums undropped weights
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
        strided_product(nr, Dvp, nj, s.data(), kBc, int64_t(1), vb.at(b, g, j0), vb.sr, o.data(),
                        Dvp, true);
      }
      for (int64_t r = 0; r < nr; ++r) {
        if (sinks) add_sink(sinks[h], m[r], l[r], o.data() + r * Dvp, Dvp);
        O* dst = out + (row0 + r) * d.Dv;
        for (int64_t c = 0; c < d.Dv; ++c) dst[c] = O(o[r * Dvp + c] / l[r]);
        lse[row0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// q (B, Hq, T, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv) -> {out (B, Hq, T, Dv),
// lse (B, Hq, T)}. 16-bit inputs compute in f32: k and v widen as they are
// packed, q once; the output is written 16-bit (rounded once), lse f32.
Tensors sdpa_forward(const Tensor& q_in, const Tensor& k, const Tensor& v, double scale,
                     const Mask& mask, const Dropout* drop, const Tensor& sinks) {
  const Dims d = dims_of(q_in, v);
  const DType compute = compute_dtype(q_in.dtype());
  const Tensor q = q_in.to(compute);
  Tensor out = Tensor::empty({d.B, d.Hq, d.T, d.Dv}, q_in.dtype());
  Tensor lse = Tensor::empty({d.B, d.Hq, d.T}, compute);
  dispatch_float(compute, "scaled_dot_product_attention", [&]<class T>() {
    const int64_t Sp = round_up(d.S, W), Dvp = round_up(d.Dv, W);
    Tensor kt = transpose_padded(k, Sp, compute);
    Tensor vb = as_b_operand(v, Dvp, compute);
    const Tensor s = sinks.defined() ? sinks.contiguous() : Tensor();
    auto run = [&]<class O>() {
      forward_kernel<T, O>(d, rows_of<T>(q), kt.data<T>(), Sp, rows_of<T>(vb), Dvp, T(scale), mask,
                           drop, s.defined() ? s.data<T>() : nullptr, out.data<O>(), lse.data<T>());
    };
    if (out.dtype() == DType::bf16) {
      run.template operator()<bfloat16>();
    } else if (out.dtype() == DType::f16) {
      run.template operator()<float16>();
    } else {
      run.template operator()<T>();
    }
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
  Mask mask;
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
  const Dims& d = a.d;
  const int64_t g = h / d.group(), nr = std::min(kBr, d.T - i0), row0 = (b * d.Hq + h) * d.T + i0;
  const int64_t nj = std::min(kBc, d.S - j0), nch = ceil_div(nj, W), ncol = nch * W;
  const T* ktg = a.kt + (b * d.Hkv + g) * d.D * a.Sp;   // (D, Sp)
  const T* vtg = a.vt + (b * d.Hkv + g) * d.Dv * a.Sp;  // (Dv, Sp)
  T* p = s.p.data();
  T* ds = s.ds.data();
  strided_product(nr, ncol, d.D, a.q.at(b, h, i0), a.q.sr, a.q.sc, ktg + j0, a.Sp, p, kBc, false);
  for (int64_t r = 0; r < nr; ++r) {
    T* row = p + r * kBc;
    probabilities(row, ncol, a.mask.visible(i0 + r, j0, nj), a.scale, a.lse[row0 + r]);
    if (a.drop) {
      T* zr = s.z.data() + r * kBc;
      dropout_factors(*a.drop, d.S, row0 + r, j0, nj, ncol, s.words.data(), zr);
      if (dv_acc) {
        for (int64_t j = 0; j < ncol; ++j) s.pz[r * kBc + j] = row[j] * zr[j];
      }
    }
  }
  if (dv_acc) {  // A = (P Z)^T, read through strides (1, Bc)
    strided_product(nj, a.Dvp, nr, a.drop ? s.pz.data() : p, int64_t(1), kBc, a.dob.at(b, h, i0),
                    a.dob.sr, dv_acc, a.Dvp, true);
  }
  strided_product(nr, ncol, d.Dv, a.dout.at(b, h, i0), a.dout.sr, a.dout.sc, vtg + j0, a.Sp, ds,
                  kBc, false);
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
    strided_product(nj, a.Dp, nr, ds, int64_t(1), kBc, a.qb.at(b, h, i0), a.qb.sr, dk_acc, a.Dp,
                    true);
  }
  if (dq)
    strided_product(nr, a.Dp, nj, ds, kBc, int64_t(1), a.kb.at(b, g, j0), a.kb.sr, dq, a.Dp, true);
}

// dK and dV of key block j0 of (b, kv head g), summed over its query heads
// and query blocks in order; with_dq also adds each tile's dS K to dQ.
template <class T>
void key_block(const BackwardArgs<T>& a, BackwardScratch<T>& s, std::vector<T>& dk_acc,
               std::vector<T>& dv_acc, int64_t b, int64_t g, int64_t j0, bool with_dq) {
  const Dims& d = a.d;
  std::fill(dk_acc.begin(), dk_acc.end(), T(0));
  std::fill(dv_acc.begin(), dv_acc.end(), T(0));
  const Mask& mask = a.mask;
  for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
    // Causal: queries before j0 - off see nothing of this block; with a
    // window, nor do the blocks past the last whose window reaches it.
    for (int64_t i0 = mask.causal ? std::max<int64_t>(0, j0 - mask.off) / kBr * kBr : 0;
         i0 < d.T && mask.reaches(i0, j0); i0 += kBr) {
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
      // The tiles key_block visits: causal ones only where j0 < i0 + Br + off,
      // windowed ones from the first block the window reaches.
      const int64_t kend = a.mask.causal ? std::min(d.S, i0 + kBr + a.mask.off) : d.S;
      T* dq = a.dq + ((b * d.Hq + h) * d.T + i0) * a.Dp;
      for (int64_t j0 = a.mask.first_block(i0); j0 < kend; j0 += kBc)
        backward_tile<T>(a, s, b, h, i0, j0, nullptr, nullptr, dq);
    }
  });
}

Mask mask_of(const AttentionParams& params) {
  return {.causal = params.causal, .off = params.causal_offset, .window = params.window};
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
Tensors backward_pass(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                      const Tensor& lse, const Tensor& dout, double scale, const Mask& mask,
                      const Dropout* drop, bool need_dq, bool need_dk) {
  const Dims d = dims_of(q, v);
  Tensors grads(3);
  dispatch_float(q.dtype(), "scaled_dot_product_attention", [&]<class T>() {
    BackwardArgs<T> a{.d = d, .scale = T(scale), .mask = mask, .drop = drop};
    a.Sp = round_up(d.S, W);
    a.Dp = round_up(d.D, W);
    a.Dvp = round_up(d.Dv, W);
    // k and v may be 16-bit: they widen to q's dtype as they are packed.
    Tensor kt = transpose_padded(k, a.Sp, q.dtype()), vt = transpose_padded(v, a.Sp, q.dtype());
    Tensor qb = need_dk ? as_b_operand(q, a.Dp, q.dtype()) : q;
    Tensor kb = need_dq ? as_b_operand(k, a.Dp, q.dtype()) : Tensor();
    Tensor dob = as_b_operand(dout, a.Dvp, q.dtype());
    Tensor lse_c = lse.contiguous();
    Tensor delta = row_dot<T>(d, rows_of<T>(dout), out);
    Tensor dq = need_dq ? Tensor::zeros({d.B, d.Hq, d.T, a.Dp}, q.dtype()) : Tensor();
    if (need_dk) grads[1] = Tensor::empty(k.shape(), q.dtype());
    grads[2] = Tensor::empty(v.shape(), q.dtype());
    a.q = rows_of<T>(q);
    a.qb = rows_of<T>(qb);
    if (need_dq) a.kb = rows_of<T>(kb);
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

}  // namespace

// bf16 and f16 attention computes in f32: q, k, v (and in backward out
// and dout) widen exactly, k and v as the kernels pack them; the output and
// the gradients round once to the 16-bit dtype; lse stays f32.
Tensors CpuBackend::sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttentionParams& params) {
  std::optional<Dropout> drop;
  if (params.dropout) drop.emplace(*params.dropout);
  return sdpa_forward(q, k, v, params.scale, mask_of(params), drop ? &*drop : nullptr,
                      params.sinks);
}

Tensors CpuBackend::sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionParams& params, bool need_dq, bool need_dk) {
  std::optional<Dropout> drop;
  if (params.dropout) drop.emplace(*params.dropout);
  const DType compute = compute_dtype(q.dtype());
  Tensors grads =
      backward_pass(q.to(compute), k, v, out.to(compute), lse, dout.to(compute), params.scale,
                    mask_of(params), drop ? &*drop : nullptr, need_dq, need_dk);
  for (Tensor& g : grads) {
    if (g.defined()) g = g.to(q.dtype());
  }
  return grads;
}

REPRISE_CPU_END
