#pragma once
// Fused scaled dot-product attention, forward and backward, flash style
// (FlashAttention-2's loop order), computing cpu/attention.cpp's sums in
// cpu/attention.cpp's order, so that it gives the CPU's bits (up to the
// log of lse, which is each library's own):
//
// B = batch, Hq/Hkv = query/kv heads, G = Hq / Hkv, T = queries, S = keys,
// D = q/k head size, Dv = v head size. Keys go in blocks of Bc = 64 (the
// CPU's tile: its online softmax rescales once per key block), queries in
// tiles whose size changes no bits (rows are independent in the forward;
// in the backward a query tile only partitions one chain over rows).
//
// Forward, a block per (b, h, 64 queries), for each key block:
//   S = scale Q K^T (masked; each score one FMA chain over d from 0),
//   m' = max(m, rowmax S) and l = l exp(m - m') + rowsum exp(S - m') as
//   the CPU's 16 lanes (cuda/kernels/rows.h's mapping), P = exp(S - m')
//   times the dropout factors, O = O exp(m - m') + P V (one FMA chain per
//   element over the block's keys, continuing from O);
//   then, with sinks, the head's sink as one more key without a value, and
//   out = O / l and lse = m + log l.
// Backward (Di = rowsum(dO O) first):
//   dK, dV: a block per (b, kv head g, key block), over its query heads,
//     then its query tiles, in order: P = exp(scale Q K^T - lse),
//     dP = dO V^T, dS = P (Z dP - Di) scale, dV += (P Z)^T dO, dK += dS^T Q.
//   dQ: a block per (b, h, 32 queries), over the key blocks in order,
//     recomputing P and dS: dQ += dS K.
// Each sum has one owner that adds its terms in one order: no atomics.
// Every pass skips the tiles the CPU skips (past the causal bound, before
// the sliding window): they would add only zeros.
// Dropout factors Z come from the op's reservation exactly as on the CPU
// (backend.h's AttentionDropout: word ((b Hq + h) T + i) S + j).

#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda/kernel.h"
#include "cuda/kernels/copy.h"
#include "cuda/kernels/rows.h"
#include "engine/backend.h"
#include "engine/tensor.h"
#include "rng/distributions.h"
#include "rng/philox.h"

namespace reprise::cuda {

inline constexpr int64_t kKeyBlock = kAttentionKeyBlock;  // Bc, the CPU's
inline constexpr int64_t kFwdRows = 64;                   // query rows of a forward block
inline constexpr int kAttnThreads = 256;

// A 4-d tensor (b, h, row, col) by its strides.
template <class T>
struct Rows4 {
  const T* data;
  int64_t sb, sh, sr, sc;
  REPRISE_HD const T* at(int64_t b, int64_t h, int64_t r) const {
    return data + b * sb + h * sh + r * sr;
  }
};
template <class T>
Rows4<T> rows4(const Tensor& t) {
  return {static_cast<const T*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

struct AttnShape {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  REPRISE_HD int64_t group() const { return Hq / Hkv; }
};

// The dropout factor of weight (row, j) (row = (b Hq + h) T + i): 1 / (1 -
// p) when its word keeps it, else 0; 1 without dropout.
template <class T>
struct AttnDropout {
  bool on;
  uint64_t seed, subsequence, offset;
  float threshold;
  T keep;
  REPRISE_HD T factor(int64_t row, int64_t S, int64_t j) const {
    if (!on) return T(1);
    const uint32_t w =
        rng::stream_word(seed, subsequence, offset + uint64_t(row) * uint64_t(S) + uint64_t(j));
    return rng::bernoulli(w, threshold) ? keep : T(0);
  }
};

REPRISE_HD int64_t clamp_to(int64_t x, int64_t hi) { return x < 0 ? 0 : (x > hi ? hi : x); }

// Which keys query i sees, as cpu/attention.cpp's Mask: under a causal mask
// j <= i + off, and with a window also j > i + off - window.
struct AttnMask {
  bool causal;
  int64_t off;     // causal offset
  int64_t window;  // 0: none

  REPRISE_HD int64_t first_key(int64_t i) const {
    return window > 0 && i + off - window + 1 > 0 ? i + off - window + 1 : 0;
  }
  // Query i sees keys [j0 + first, j0 + end) of the block at j0 (nj keys).
  REPRISE_HD int64_t first(int64_t i, int64_t j0, int64_t nj) const {
    return clamp_to(first_key(i) - j0, nj);
  }
  REPRISE_HD int64_t end(int64_t i, int64_t j0, int64_t nj) const {
    return causal ? clamp_to(i + off - j0 + 1, nj) : nj;
  }
  // Whether query i's window (or a later query's, which starts later)
  // reaches the key block at j0.
  REPRISE_HD bool reaches(int64_t i, int64_t j0) const { return first_key(i) < j0 + kKeyBlock; }
  // The first key block query i's window reaches.
  REPRISE_HD int64_t first_block(int64_t i) const { return first_key(i) / kKeyBlock * kKeyBlock; }
};

// scale * (q row) . (k row), one FMA chain over d from 0.
template <class T>
REPRISE_HD T dot_chain(const T* q, int64_t qc, const T* k, int64_t D) {
  T acc = T(0);
  for (int64_t d = 0; d < D; ++d) acc = std::fma(q[d * qc], k[d], acc);
  return acc;
}

// ---- forward ------------------------------------------------------------------

template <class T>
struct AttnForwardKernel {
  static constexpr int kThreads = kAttnThreads;
  Rows4<T> q, k, v;
  T* out;  // (B, Hq, T, Dv)
  T* lse;  // (B, Hq, T)
  AttnShape s;
  T scale;
  AttnMask mask;
  AttnDropout<T> drop;
  const T* sinks = nullptr;  // (Hq): AttentionParams::sinks, or none

  // Shared memory: the query tile, a key block (k, then v; rows padded by
  // one), the scores (rows padded), O, and per row m, l and exp(m - m').
  struct Smem {
    T *q, *kv, *p, *o, *m, *l, *alpha;
    int64_t kvw;  // kv's row width
    size_t bytes;
    REPRISE_HD static Smem make(uintptr_t base, const AttnShape& s) {
      SharedLayout l(base);
      Smem m;
      m.kvw = (s.D > s.Dv ? s.D : s.Dv) + 1;
      m.q = l.take<T>(kFwdRows * s.D);
      m.kv = l.take<T>(kKeyBlock * m.kvw);
      m.p = l.take<T>(kFwdRows * (kKeyBlock + 1));
      m.o = l.take<T>(kFwdRows * s.Dv);
      m.m = l.take<T>(kFwdRows);
      m.l = l.take<T>(kFwdRows);
      m.alpha = l.take<T>(kFwdRows);
      m.bytes = l.bytes();
      return m;
    }
  };
  static size_t shared_bytes(const AttnShape& s) { return Smem::make(0, s).bytes; }

  // One body of about 110 lines, longer than the project's functions: its
  // phases (load the query rows; per key block the scores, the online
  // softmax's rescale and the P V product) hand each other shared memory
  // and per-thread state across barriers, and kept together every sync()
  // stands where the phase it closes ends.
  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const Smem sm = Smem::make(reinterpret_cast<uintptr_t>(ctx.shared()), s);
    constexpr int64_t P = kKeyBlock + 1;  // p's row width
    const int64_t nqb = (s.T + kFwdRows - 1) / kFwdRows;
    for (int64_t w = ctx.block(); w < s.B * s.Hq * nqb; w += ctx.blocks()) {
      const int64_t b = w / (s.Hq * nqb), h = w / nqb % s.Hq, g = h / s.group();
      const int64_t i0 = w % nqb * kFwdRows;
      const int64_t nr = s.T - i0 < kFwdRows ? s.T - i0 : kFwdRows;
      const int64_t row0 = (b * s.Hq + h) * s.T + i0;
      const int64_t kend =
          mask.causal ? (s.S < i0 + nr + mask.off ? s.S : i0 + nr + mask.off) : s.S;
      ctx.threads([&](int t) {
        for (int64_t e = t; e < nr * s.D; e += kThreads)
          sm.q[e] = q.at(b, h, i0 + e / s.D)[e % s.D * q.sc];
        for (int64_t e = t; e < nr * s.Dv; e += kThreads) sm.o[e] = T(0);
        for (int64_t r = t; r < kFwdRows; r += kThreads) {
          sm.m[r] = -std::numeric_limits<T>::infinity();
          sm.l[r] = T(0);
        }
      });
      for (int64_t j0 = mask.first_block(i0); j0 < kend; j0 += kKeyBlock) {
        const int64_t nj = kend - j0 < kKeyBlock ? kend - j0 : kKeyBlock;
        ctx.sync();  // the previous block's readers are done with kv
        ctx.threads([&](int t) {
          for (int64_t e = t; e < nj * s.D; e += kThreads)
            sm.kv[e / s.D * sm.kvw + e % s.D] = k.at(b, g, j0 + e / s.D)[e % s.D * k.sc];
        });
        ctx.sync();
        // Scores, scaled and masked; columns past nj are masked too.
        ctx.threads([&](int t) {
          for (int64_t e = t; e < nr * kKeyBlock; e += kThreads) {
            const int64_t r = e / kKeyBlock, j = e % kKeyBlock;
            const bool seen = j >= mask.first(i0 + r, j0, nj) && j < mask.end(i0 + r, j0, nj);
            sm.p[r * P + j] =
                seen ? dot_chain(sm.q + r * s.D, int64_t(1), sm.kv + j * sm.kvw, s.D) * scale
                     : -std::numeric_limits<T>::infinity();
          }
        });
        ctx.sync();
        ctx.threads([&](int t) {
          for (int64_t e = t; e < nj * s.Dv; e += kThreads)
            sm.kv[e / s.Dv * sm.kvw + e % s.Dv] = v.at(b, g, j0 + e / s.Dv)[e % s.Dv * v.sc];
        });
        // Row statistics, 16 rows at a time, one row per 16 lanes.
        for (int64_t r0 = 0; r0 < nr; r0 += kLanes) {
          auto active = [&](int t) { return r0 + t / kLanes < nr; };
          auto row = [&](int t) { return sm.p + (r0 + t / kLanes) * P; };
          auto mx = local<T>(ctx);
          ctx.threads([&](int t) {
            T a = -std::numeric_limits<T>::infinity();
            if (active(t)) {
              for (int64_t j = t % kLanes; j < kKeyBlock; j += kLanes) a = fn::vmax(row(t)[j], a);
            }
            mx[t] = a;
          });
          fold16_max(ctx, mx);
          // m_new, and the shift of the exponentials: 0 while a row's
          // window has not begun (m_new = -inf), as on the CPU.
          auto m_new = local<T>(ctx);
          auto shift = local<T>(ctx);
          ctx.threads([&](int t) {
            if (!active(t)) return;
            const T m_old = sm.m[r0 + t / kLanes];
            m_new[t] = m_old < mx[t] ? mx[t] : m_old;  // std::max(m_old, tile max)
            shift[t] = m_new[t] == -std::numeric_limits<T>::infinity() ? T(0) : m_new[t];
          });
          auto sum = local<T>(ctx);
          ctx.threads([&](int t) {
            T a = T(0);
            if (active(t)) {
              for (int64_t j = t % kLanes; j < kKeyBlock; j += kLanes) {
                const T e = fn::exp_of(row(t)[j] - shift[t]);
                row(t)[j] = e;
                a = a + e;
              }
            }
            sum[t] = a;
          });
          fold16_sum(ctx, sum);
          ctx.threads([&](int t) {
            if (!active(t)) return;
            const int64_t r = r0 + t / kLanes;
            if (drop.on) {  // l sums the undropped weights
              for (int64_t j = t % kLanes; j < kKeyBlock; j += kLanes)
                row(t)[j] *= j < nj ? drop.factor(row0 + r, s.S, j0 + j) : T(0);
            }
            if (t % kLanes != 0) return;
            const T alpha = fn::exp_of(sm.m[r] - shift[t]);
            sm.alpha[r] = alpha;
            sm.l[r] = sm.l[r] * alpha + sum[t];
            sm.m[r] = m_new[t];
          });
        }
        ctx.sync();
        ctx.threads([&](int t) {
          for (int64_t e = t; e < nr * s.Dv; e += kThreads) {
            const int64_t r = e / s.Dv, c = e % s.Dv;
            T acc = sm.o[e];
            if (sm.alpha[r] != T(1)) acc *= sm.alpha[r];
            for (int64_t j = 0; j < nj; ++j)
              acc = std::fma(sm.p[r * P + j], sm.kv[j * sm.kvw + c], acc);
            sm.o[e] = acc;
          }
        });
      }
      ctx.sync();
      if (sinks) {
        // The head's sink as the last key, with no value (cpu/attention.cpp's
        // add_sink): m' = max(m, sink), l = l exp(m - m') + exp(sink - m'),
        // O = O exp(m - m').
        ctx.threads([&](int t) {
          for (int64_t r = t; r < nr; r += kThreads) {
            const T sink = sinks[h];
            const T m_new = sm.m[r] < sink ? sink : sm.m[r];  // std::max(m, sink)
            const T alpha = fn::exp_of(sm.m[r] - m_new);
            sm.l[r] = sm.l[r] * alpha + fn::exp_of(sink - m_new);
            sm.m[r] = m_new;
            sm.alpha[r] = alpha;
          }
        });
        ctx.sync();
        ctx.threads([&](int t) {
          for (int64_t e = t; e < nr * s.Dv; e += kThreads) {
            if (sm.alpha[e / s.Dv] != T(1)) sm.o[e] *= sm.alpha[e / s.Dv];
          }
        });
        ctx.sync();
      }
      ctx.threads([&](int t) {
        for (int64_t e = t; e < nr * s.Dv; e += kThreads)
          out[(row0 + e / s.Dv) * s.Dv + e % s.Dv] = sm.o[e] / sm.l[e / s.Dv];
        for (int64_t r = t; r < nr; r += kThreads) lse[row0 + r] = sm.m[r] + std::log(sm.l[r]);
      });
      ctx.sync();  // the next tile overwrites q and o
    }
  }
};

// ---- backward -------------------------------------------------------------------

// Di = rowsum(dO * O), in order (mul then add, as the CPU).
template <class T>
struct AttnDeltaKernel {
  static constexpr int kThreads = 256;
  Rows4<T> dout, out;
  T* delta;  // (B, Hq, T)
  AttnShape s;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const int64_t rows = s.B * s.Hq * s.T;
    ctx.threads([&](int t) {
      for (int64_t r = ctx.block() * kThreads + t; r < rows; r += ctx.blocks() * kThreads) {
        const int64_t b = r / (s.Hq * s.T), h = r / s.T % s.Hq, i = r % s.T;
        const T* x = dout.at(b, h, i);
        const T* y = out.at(b, h, i);
        T acc = 0;
        for (int64_t c = 0; c < s.Dv; ++c) acc += x[c * dout.sc] * y[c * out.sc];
        delta[r] = acc;
      }
    });
  }
};

// What both backward kernels read.
template <class T>
struct AttnBackwardArgs {
  Rows4<T> q, k, v, dout;
  const T* lse;    // (B, Hq, T)
  const T* delta;  // (B, Hq, T)
  AttnShape s;
  T scale;
  AttnMask mask;
  AttnDropout<T> drop;
};

// Shared memory of a backward block: a key block (k, v; rows padded by
// one), a query tile (q, dO, lse, Di), the tile's P (times Z) and dS, and
// the block's accumulators acc0 (dK or dQ) and acc1 (dV).
template <class T>
struct AttnBwdSmem {
  T *k, *v, *q, *dout, *lse, *delta, *pz, *ds, *acc0, *acc1;
  int64_t kw, vw;
  REPRISE_HD static AttnBwdSmem make(uintptr_t base, const AttnShape& s, int64_t rows,
                                     int64_t acc0_rows, bool with_acc1) {
    SharedLayout l(base);
    AttnBwdSmem m;
    m.kw = s.D + 1;
    m.vw = s.Dv + 1;
    m.k = l.take<T>(kKeyBlock * m.kw);
    m.v = l.take<T>(kKeyBlock * m.vw);
    m.q = l.take<T>(rows * s.D);
    m.dout = l.take<T>(rows * s.Dv);
    m.lse = l.take<T>(rows);
    m.delta = l.take<T>(rows);
    m.pz = l.take<T>(rows * (kKeyBlock + 1));
    m.ds = l.take<T>(rows * (kKeyBlock + 1));
    m.acc0 = l.take<T>(acc0_rows * s.D);
    m.acc1 = with_acc1 ? l.take<T>(kKeyBlock * s.Dv) : nullptr;
    m.bytes_ = l.bytes();
    return m;
  }
  size_t bytes_ = 0;
};

// Loads query tile rows [i0, i0 + nr) of head h into shared memory.
template <class T, class Ctx>
REPRISE_HD void load_query_tile(Ctx& ctx, const AttnBackwardArgs<T>& a, const AttnBwdSmem<T>& sm,
                                int64_t b, int64_t h, int64_t i0, int64_t nr) {
  const AttnShape& s = a.s;
  const int64_t row0 = (b * s.Hq + h) * s.T + i0;
  ctx.threads([&](int t) {
    for (int64_t e = t; e < nr * s.D; e += Ctx::kThreads)
      sm.q[e] = a.q.at(b, h, i0 + e / s.D)[e % s.D * a.q.sc];
    for (int64_t e = t; e < nr * s.Dv; e += Ctx::kThreads)
      sm.dout[e] = a.dout.at(b, h, i0 + e / s.Dv)[e % s.Dv * a.dout.sc];
    for (int64_t r = t; r < nr; r += Ctx::kThreads) {
      sm.lse[r] = a.lse[row0 + r];
      sm.delta[r] = a.delta[row0 + r];
    }
  });
}

// Loads key block rows [j0, j0 + nj) of kv head g.
template <class T, class Ctx>
REPRISE_HD void load_key_block(Ctx& ctx, const AttnBackwardArgs<T>& a, const AttnBwdSmem<T>& sm,
                               int64_t b, int64_t g, int64_t j0, int64_t nj) {
  const AttnShape& s = a.s;
  ctx.threads([&](int t) {
    for (int64_t e = t; e < nj * s.D; e += Ctx::kThreads)
      sm.k[e / s.D * sm.kw + e % s.D] = a.k.at(b, g, j0 + e / s.D)[e % s.D * a.k.sc];
    for (int64_t e = t; e < nj * s.Dv; e += Ctx::kThreads)
      sm.v[e / s.Dv * sm.vw + e % s.Dv] = a.v.at(b, g, j0 + e / s.Dv)[e % s.Dv * a.v.sc];
  });
}

// P Z and dS of the tile (query rows [i0, i0 + nr) of head h, keys [j0, j0 +
// nj)), into shared memory, as cpu/attention.cpp's backward_tile.
template <class T, class Ctx>
REPRISE_HD void tile_gradients(Ctx& ctx, const AttnBackwardArgs<T>& a, const AttnBwdSmem<T>& sm,
                               int64_t b, int64_t h, int64_t i0, int64_t nr, int64_t j0,
                               int64_t nj) {
  const AttnShape& s = a.s;
  constexpr int64_t P = kKeyBlock + 1;
  const int64_t row0 = (b * s.Hq + h) * s.T + i0;
  ctx.threads([&](int t) {
    for (int64_t e = t; e < nr * nj; e += Ctx::kThreads) {
      const int64_t r = e / nj, j = e % nj;
      const T p =
          j >= a.mask.first(i0 + r, j0, nj) && j < a.mask.end(i0 + r, j0, nj)
              ? fn::exp_of(dot_chain(sm.q + r * s.D, int64_t(1), sm.k + j * sm.kw, s.D) * a.scale -
                           sm.lse[r])
              : T(0);
      const T dp = dot_chain(sm.dout + r * s.Dv, int64_t(1), sm.v + j * sm.vw, s.Dv);
      if (a.drop.on) {
        const T z = a.drop.factor(row0 + r, s.S, j0 + j);
        sm.pz[r * P + j] = p * z;
        sm.ds[r * P + j] = p * (dp * z - sm.delta[r]) * a.scale;
      } else {
        sm.pz[r * P + j] = p;
        sm.ds[r * P + j] = p * (dp - sm.delta[r]) * a.scale;
      }
    }
  });
}

// Query rows of a backward tile.
inline constexpr int64_t kBwdRows = 32;

template <class T>
struct AttnKeyGradKernel {  // dK and dV
  static constexpr int kThreads = kAttnThreads;
  AttnBackwardArgs<T> a;
  T* dk;  // (B, Hkv, S, D), or null when not needed
  T* dv;  // (B, Hkv, S, Dv)

  static size_t shared_bytes(const AttnShape& s) {
    return AttnBwdSmem<T>::make(0, s, kBwdRows, kKeyBlock, true).bytes_;
  }

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const AttnShape& s = a.s;
    const AttnBwdSmem<T> sm = AttnBwdSmem<T>::make(reinterpret_cast<uintptr_t>(ctx.shared()), s,
                                                   kBwdRows, kKeyBlock, true);
    constexpr int64_t P = kKeyBlock + 1;
    const int64_t nkb = (s.S + kKeyBlock - 1) / kKeyBlock;
    for (int64_t w = ctx.block(); w < s.B * s.Hkv * nkb; w += ctx.blocks()) {
      const int64_t b = w / (s.Hkv * nkb), g = w / nkb % s.Hkv, j0 = w % nkb * kKeyBlock;
      const int64_t nj = s.S - j0 < kKeyBlock ? s.S - j0 : kKeyBlock;
      load_key_block(ctx, a, sm, b, g, j0, nj);
      ctx.threads([&](int t) {
        for (int64_t e = t; e < nj * s.D; e += kThreads) sm.acc0[e] = T(0);
        for (int64_t e = t; e < nj * s.Dv; e += kThreads) sm.acc1[e] = T(0);
      });
      for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
        // Causal: queries before j0 - off see nothing of this block; with a
        // window, nor do the tiles past the last whose window reaches it.
        const int64_t first = a.mask.causal && j0 > a.mask.off ? j0 - a.mask.off : 0;
        for (int64_t i0 = first / kBwdRows * kBwdRows; i0 < s.T && a.mask.reaches(i0, j0);
             i0 += kBwdRows) {
          const int64_t nr = s.T - i0 < kBwdRows ? s.T - i0 : kBwdRows;
          ctx.sync();
          load_query_tile(ctx, a, sm, b, h, i0, nr);
          ctx.sync();
          tile_gradients(ctx, a, sm, b, h, i0, nr, j0, nj);
          ctx.sync();
          ctx.threads([&](int t) {
            for (int64_t e = t; e < nj * s.Dv; e += kThreads) {
              const int64_t j = e / s.Dv, c = e % s.Dv;
              T acc = sm.acc1[e];
              for (int64_t r = 0; r < nr; ++r)
                acc = std::fma(sm.pz[r * P + j], sm.dout[r * s.Dv + c], acc);
              sm.acc1[e] = acc;
            }
            if (dk == nullptr) return;
            for (int64_t e = t; e < nj * s.D; e += kThreads) {
              const int64_t j = e / s.D, c = e % s.D;
              T acc = sm.acc0[e];
              for (int64_t r = 0; r < nr; ++r)
                acc = std::fma(sm.ds[r * P + j], sm.q[r * s.D + c], acc);
              sm.acc0[e] = acc;
            }
          });
        }
      }
      ctx.sync();
      ctx.threads([&](int t) {
        const int64_t key0 = (b * s.Hkv + g) * s.S + j0;
        for (int64_t e = t; e < nj * s.Dv; e += kThreads) dv[key0 * s.Dv + e] = sm.acc1[e];
        if (dk == nullptr) return;
        for (int64_t e = t; e < nj * s.D; e += kThreads) dk[key0 * s.D + e] = sm.acc0[e];
      });
      ctx.sync();
    }
  }
};

template <class T>
struct AttnQueryGradKernel {  // dQ
  static constexpr int kThreads = kAttnThreads;
  AttnBackwardArgs<T> a;
  T* dq;  // (B, Hq, T, D)

  static size_t shared_bytes(const AttnShape& s) {
    return AttnBwdSmem<T>::make(0, s, kBwdRows, kBwdRows, false).bytes_;
  }

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const AttnShape& s = a.s;
    const AttnBwdSmem<T> sm = AttnBwdSmem<T>::make(reinterpret_cast<uintptr_t>(ctx.shared()), s,
                                                   kBwdRows, kBwdRows, false);
    constexpr int64_t P = kKeyBlock + 1;
    const int64_t nqb = (s.T + kBwdRows - 1) / kBwdRows;
    for (int64_t w = ctx.block(); w < s.B * s.Hq * nqb; w += ctx.blocks()) {
      const int64_t b = w / (s.Hq * nqb), h = w / nqb % s.Hq, g = h / s.group();
      const int64_t i0 = w % nqb * kBwdRows;
      const int64_t nr = s.T - i0 < kBwdRows ? s.T - i0 : kBwdRows;
      // The key blocks the CPU's 64-row tile of these rows visits.
      const int64_t tile0 = i0 / kKeyBlock * kKeyBlock;
      const int64_t kend_tile = tile0 + kKeyBlock + a.mask.off;
      const int64_t kend = a.mask.causal ? (s.S < kend_tile ? s.S : kend_tile) : s.S;
      load_query_tile(ctx, a, sm, b, h, i0, nr);
      ctx.threads([&](int t) {
        for (int64_t e = t; e < nr * s.D; e += kThreads) sm.acc0[e] = T(0);
      });
      for (int64_t j0 = a.mask.first_block(tile0); j0 < kend; j0 += kKeyBlock) {
        const int64_t nj = s.S - j0 < kKeyBlock ? s.S - j0 : kKeyBlock;
        ctx.sync();
        load_key_block(ctx, a, sm, b, g, j0, nj);
        ctx.sync();
        tile_gradients(ctx, a, sm, b, h, i0, nr, j0, nj);
        ctx.sync();
        ctx.threads([&](int t) {
          for (int64_t e = t; e < nr * s.D; e += kThreads) {
            const int64_t r = e / s.D, c = e % s.D;
            T acc = sm.acc0[e];
            for (int64_t j = 0; j < nj; ++j)
              acc = std::fma(sm.ds[r * P + j], sm.k[j * sm.kw + c], acc);
            sm.acc0[e] = acc;
          }
        });
      }
      ctx.sync();
      ctx.threads([&](int t) {
        const int64_t row0 = (b * s.Hq + h) * s.T + i0;
        for (int64_t e = t; e < nr * s.D; e += kThreads) dq[row0 * s.D + e] = sm.acc0[e];
      });
      ctx.sync();
    }
  }
};

// ---- drivers ----------------------------------------------------------------------

inline AttnShape attn_shape(const Tensor& q, const Tensor& v) {
  return {q.size(0), q.size(1), v.size(1), q.size(2), v.size(2), q.size(3), v.size(3)};
}

inline AttnMask attn_mask(const AttentionParams& params) {
  return {.causal = params.causal, .off = params.causal_offset, .window = params.window};
}

template <class T>
AttnDropout<T> attn_dropout(const AttentionParams& params) {
  if (!params.dropout) return {.on = false};
  const AttentionDropout& d = *params.dropout;
  return {.on = true,
          .seed = d.words.seed,
          .subsequence = d.words.subsequence,
          .offset = d.words.offset,
          .threshold = rng::bernoulli_threshold(1.0 - d.p),
          .keep = T(1.0 / (1.0 - d.p))};
}

// Raises when a kernel's shared memory exceeds what the device gives a block.
inline void check_shared(size_t need, size_t limit, const AttnShape& s, DType dtype) {
  REPRISE_CHECK(need <= limit, "scaled_dot_product_attention on CUDA: head sizes D = ", s.D,
                ", Dv = ", s.Dv, " in ", dtype_name(dtype), " need ", need,
                " bytes of shared memory per block, the device has ", limit);
}

inline int64_t attn_blocks(int64_t units) { return units < kMaxBlocks ? units : kMaxBlocks; }

template <class Exec>
Tensors sdpa(const Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v,
             const AttentionParams& params) {
  const AttnShape s = attn_shape(q, v);
  Tensor out = Tensor::empty({s.B, s.Hq, s.T, s.Dv}, q.dtype(), ex.device());
  Tensor lse = Tensor::empty({s.B, s.Hq, s.T}, q.dtype(), ex.device());
  if (out.numel() == 0) return {out, lse};
  dispatch_float(q.dtype(), "scaled_dot_product_attention", [&]<class T>() {
    using K = AttnForwardKernel<T>;
    const size_t bytes = K::shared_bytes(s);
    check_shared(bytes, ex.max_shared_bytes(), s, q.dtype());
    const Tensor sinks = params.sinks.defined() ? params.sinks.contiguous() : Tensor();
    ex.launch(K{.q = rows4<T>(q),
                .k = rows4<T>(k),
                .v = rows4<T>(v),
                .out = out.data<T>(),
                .lse = lse.data<T>(),
                .s = s,
                .scale = T(params.scale),
                .mask = attn_mask(params),
                .drop = attn_dropout<T>(params),
                .sinks = sinks.defined() ? sinks.data<T>() : nullptr},
              attn_blocks(s.B * s.Hq * ((s.T + kFwdRows - 1) / kFwdRows)), bytes);
  });
  return {out, lse};
}

template <class Exec>
Tensors sdpa_backward(const Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& out, const Tensor& lse_in, const Tensor& dout,
                      const AttentionParams& params, bool need_dq, bool need_dk) {
  const AttnShape s = attn_shape(q, v);
  Tensors grads(3);
  grads[2] = Tensor::empty(v.shape(), v.dtype(), ex.device());
  if (need_dk) grads[1] = Tensor::empty(k.shape(), k.dtype(), ex.device());
  if (need_dq) grads[0] = Tensor::empty(q.shape(), q.dtype(), ex.device());
  if (s.B * s.Hq * s.T == 0) {
    for (const Tensor& g : grads) {
      if (g.defined()) fill(ex, g, 0.0);
    }
    return grads;
  }
  const Tensor lse = lse_in.contiguous();
  dispatch_float(q.dtype(), "scaled_dot_product_attention", [&]<class T>() {
    const Tensor delta = Tensor::empty({s.B, s.Hq, s.T}, q.dtype(), ex.device());
    ex.launch(AttnDeltaKernel<T>{rows4<T>(dout), rows4<T>(out), delta.data<T>(), s},
              blocks_for(s.B * s.Hq * s.T, 256));
    const AttnBackwardArgs<T> a{.q = rows4<T>(q),
                                .k = rows4<T>(k),
                                .v = rows4<T>(v),
                                .dout = rows4<T>(dout),
                                .lse = lse.data<T>(),
                                .delta = delta.data<T>(),
                                .s = s,
                                .scale = T(params.scale),
                                .mask = attn_mask(params),
                                .drop = attn_dropout<T>(params)};
    const size_t key_bytes = AttnKeyGradKernel<T>::shared_bytes(s);
    check_shared(key_bytes, ex.max_shared_bytes(), s, q.dtype());
    ex.launch(AttnKeyGradKernel<T>{a, need_dk ? grads[1].data<T>() : nullptr, grads[2].data<T>()},
              attn_blocks(s.B * s.Hkv * ((s.S + kKeyBlock - 1) / kKeyBlock)), key_bytes);
    if (need_dq) {
      const size_t query_bytes = AttnQueryGradKernel<T>::shared_bytes(s);
      check_shared(query_bytes, ex.max_shared_bytes(), s, q.dtype());
      ex.launch(AttnQueryGradKernel<T>{a, grads[0].data<T>()},
                attn_blocks(s.B * s.Hq * ((s.T + kBwdRows - 1) / kBwdRows)), query_bytes);
    }
  });
  return grads;
}

}  // namespace reprise::cuda
