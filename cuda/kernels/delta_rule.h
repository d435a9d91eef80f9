#pragma once
// The gated delta rule (engine/kernels/delta_rule.def): one block per
// (batch, head), positions in order. In the forward each thread owns
// columns of the (K, V) state for the whole sequence (a column evolves on
// its own), so no phase waits on another. The backward recomputes a
// block's states from its checkpoint, then walks its positions backwards:
// column phases (threads over j) and row phases (threads over i, each
// summing its row over j in order), with barriers between. Every sum runs
// in cpu/delta_rule.cpp's order: the same bits as the CPU.
//
// The state and the backward's scratch live in global memory (a
// (kDeltaRuleBlock + 1, K, V) run of states per block): correct for any K
// and V, not tuned.

#include <algorithm>

#include "cuda/kernel.h"
#include "engine/backend.h"
#include "engine/delta_rule_math.h"
#include "engine/tensor.h"

namespace reprise::cuda {

// The rows of one (b, h) sequence: position t's q or k at q + t * qk_stride.
template <class T>
struct DeltaRuleRows {
  const T *q, *k, *v, *decay, *beta;
  int64_t qk_stride, v_stride, gate_stride;
};

template <class T>
struct DeltaRuleInputs {
  const T *q, *k, *v, *decay, *beta;
  int64_t B, T_, H, K, V, blocks;

  REPRISE_HD DeltaRuleRows<T> rows(int64_t bh) const {
    const int64_t row = (bh / H) * T_ * H + bh % H;
    return {q + row * K, k + row * K, v + row * V, decay + row, beta + row, H * K, H * V, H};
  }
};

template <class T>
struct DeltaRuleKernel {
  static constexpr int kThreads = 128;
  DeltaRuleInputs<T> in;
  const T* init;  // (B, H, K, V) or nullptr
  T *out, *state, *checkpoints;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const int64_t K = in.K, V = in.V, KV = K * V;
    for (int64_t bh = ctx.block(); bh < in.B * in.H; bh += ctx.blocks()) {
      const DeltaRuleRows<T> s = in.rows(bh);
      T* S = state + bh * KV;
      T* o = out + (bh / in.H) * in.T_ * in.H * V + (bh % in.H) * V;
      ctx.threads([&](int th) {
        for (int64_t j = th; j < V; j += kThreads) {
          for (int64_t i = 0; i < K; ++i) S[i * V + j] = init ? init[bh * KV + i * V + j] : T(0);
          for (int64_t t = 0; t < in.T_; ++t) {
            if (t % kDeltaRuleBlock == 0) {
              T* c = checkpoints + (bh * in.blocks + t / kDeltaRuleBlock) * KV;
              for (int64_t i = 0; i < K; ++i) c[i * V + j] = S[i * V + j];
            }
            o[t * in.H * V + j] = delta_rule_column(
                S, K, V, j, s.q + t * s.qk_stride, s.k + t * s.qk_stride, s.v[t * s.v_stride + j],
                s.decay[t * s.gate_stride], s.beta[t * s.gate_stride]);
          }
        }
      });
    }
  }
};

// The backward's scratch per (b, h): the block's states, dS, and the
// vectors m, d, dd, dm (V) and the rows' ddecay shares (K).
template <class T>
struct DeltaRuleScratch {
  T *states, *dS, *m, *d, *dd, *dm, *rows;
  REPRISE_HD static int64_t elements(int64_t K, int64_t V) {
    return (kDeltaRuleBlock + 2) * K * V + 4 * V + K;
  }
  REPRISE_HD static DeltaRuleScratch at(T* base, int64_t K, int64_t V) {
    DeltaRuleScratch s;
    s.states = base;
    s.dS = s.states + (kDeltaRuleBlock + 1) * K * V;
    s.m = s.dS + K * V;
    s.d = s.m + V;
    s.dd = s.d + V;
    s.dm = s.dd + V;
    s.rows = s.dm + V;
    return s;
  }
};

template <class T>
struct DeltaRuleBackwardKernel {
  static constexpr int kThreads = 128;
  DeltaRuleInputs<T> in;
  const T *checkpoints, *dout;
  T *dq, *dk, *dv, *ddecay, *dbeta;
  T* scratch;  // (B H, DeltaRuleScratch::elements)

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const int64_t K = in.K, V = in.V, KV = K * V, H = in.H;
    for (int64_t bh = ctx.block(); bh < in.B * H; bh += ctx.blocks()) {
      const DeltaRuleRows<T> s = in.rows(bh);
      const int64_t row = (bh / H) * in.T_ * H + bh % H;
      const T* go = dout + row * V;
      T *gq = dq + row * K, *gk = dk + row * K, *gv = dv + row * V;
      T *gdecay = ddecay + row, *gbeta = dbeta + row;
      const DeltaRuleScratch<T> w =
          DeltaRuleScratch<T>::at(scratch + bh * DeltaRuleScratch<T>::elements(K, V), K, V);
      ctx.threads([&](int th) {
        for (int64_t e = th; e < KV; e += kThreads) w.dS[e] = T(0);
      });
      for (int64_t blk = in.blocks - 1; blk >= 0; --blk) {
        const int64_t t0 = blk * kDeltaRuleBlock;
        const int64_t t1 = t0 + kDeltaRuleBlock < in.T_ ? t0 + kDeltaRuleBlock : in.T_;
        ctx.sync();
        // Recompute: each thread its columns through the block.
        ctx.threads([&](int th) {
          for (int64_t j = th; j < V; j += kThreads) {
            const T* c = checkpoints + (bh * in.blocks + blk) * KV;
            for (int64_t i = 0; i < K; ++i) w.states[i * V + j] = c[i * V + j];
            for (int64_t t = t0; t < t1; ++t) {
              T* S = w.states + (t - t0 + 1) * KV;
              for (int64_t i = 0; i < K; ++i) S[i * V + j] = S[i * V + j - KV];
              delta_rule_column(S, K, V, j, s.q + t * s.qk_stride, s.k + t * s.qk_stride,
                                s.v[t * s.v_stride + j], s.decay[t * s.gate_stride],
                                s.beta[t * s.gate_stride]);
            }
          }
        });
        for (int64_t t = t1 - 1; t >= t0; --t) {
          const T* prev = w.states + (t - t0) * KV;
          const T* S = prev + KV;
          const T* qt = s.q + t * s.qk_stride;
          const T* kt = s.k + t * s.qk_stride;
          const T* vt = s.v + t * s.v_stride;
          const T* got = go + t * H * V;
          const T a = s.decay[t * s.gate_stride], be = s.beta[t * s.gate_stride];
          ctx.sync();
          ctx.threads([&](int th) {  // columns: m, d, dS += q dout^T, dd
            for (int64_t j = th; j < V; j += kThreads) {
              T mj = 0;
              for (int64_t i = 0; i < K; ++i) mj = mj + (prev[i * V + j] * a) * kt[i];
              w.m[j] = mj;
              w.d[j] = (vt[j] - mj) * be;
              T ddj = 0;
              for (int64_t i = 0; i < K; ++i) {
                w.dS[i * V + j] = w.dS[i * V + j] + qt[i] * got[j];
                ddj = ddj + w.dS[i * V + j] * kt[i];
              }
              w.dd[j] = ddj;
              gv[t * H * V + j] = ddj * be;
              w.dm[j] = -(ddj * be);
            }
          });
          ctx.sync();
          ctx.threads([&](int th) {  // rows: dq = S dout, dk = dS d
            for (int64_t i = th; i < K; i += kThreads) {
              T dqi = 0, dki = 0;
              for (int64_t j = 0; j < V; ++j) {
                dqi = dqi + S[i * V + j] * got[j];
                dki = dki + w.dS[i * V + j] * w.d[j];
              }
              gq[t * H * K + i] = dqi;
              gk[t * H * K + i] = dki;
            }
          });
          ctx.sync();
          ctx.threads([&](int th) {  // columns: dS += k dm^T
            for (int64_t j = th; j < V; j += kThreads) {
              for (int64_t i = 0; i < K; ++i) w.dS[i * V + j] = w.dS[i * V + j] + kt[i] * w.dm[j];
            }
          });
          ctx.sync();
          ctx.threads([&](int th) {  // rows: dk += S' dm, the rows' ddecay shares
            for (int64_t i = th; i < K; i += kThreads) {
              T dki = 0, r = 0;
              for (int64_t j = 0; j < V; ++j) {
                dki = dki + (prev[i * V + j] * a) * w.dm[j];
                r = r + w.dS[i * V + j] * prev[i * V + j];
              }
              gk[t * H * K + i] = gk[t * H * K + i] + dki;
              w.rows[i] = r;
            }
          });
          ctx.sync();
          ctx.threads([&](int th) {
            if (th == 0) {  // dbeta and ddecay, in order
              T db = 0, da = 0;
              for (int64_t j = 0; j < V; ++j) db = db + w.dd[j] * (vt[j] - w.m[j]);
              for (int64_t i = 0; i < K; ++i) da = da + w.rows[i];
              gbeta[t * H] = db;
              gdecay[t * H] = da;
            }
          });
          ctx.sync();
          ctx.threads([&](int th) {
            for (int64_t e = th; e < KV; e += kThreads) w.dS[e] = w.dS[e] * a;
          });
        }
      }
      ctx.sync();
    }
  }
};

template <class T>
DeltaRuleInputs<T> delta_rule_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& decay, const Tensor& beta) {
  const int64_t T_ = q.size(1);
  return {q.data<T>(),
          k.data<T>(),
          v.data<T>(),
          decay.data<T>(),
          beta.data<T>(),
          q.size(0),
          T_,
          q.size(2),
          q.size(3),
          v.size(3),
          (T_ + kDeltaRuleBlock - 1) / kDeltaRuleBlock};
}

template <class Exec>
Tensors delta_rule(const Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& decay, const Tensor& beta, const Tensor& state) {
  const int64_t B = q.size(0), T_ = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const int64_t blocks = (T_ + kDeltaRuleBlock - 1) / kDeltaRuleBlock;
  Tensor out = Tensor::empty({B, T_, H, V}, q.dtype(), ex.device());
  Tensor final_state = Tensor::empty({B, H, K, V}, q.dtype(), ex.device());
  Tensor checkpoints = Tensor::empty({B, H, blocks, K, V}, q.dtype(), ex.device());
  if (B * H == 0) return {out, final_state, checkpoints};
  dispatch_float(q.dtype(), "delta_rule", [&]<class T>() {
    ex.launch(DeltaRuleKernel<T>{.in = delta_rule_inputs<T>(q, k, v, decay, beta),
                                 .init = state.defined() ? state.data<T>() : nullptr,
                                 .out = out.data<T>(),
                                 .state = final_state.data<T>(),
                                 .checkpoints = checkpoints.data<T>()},
              std::min(B * H, kMaxBlocks));
  });
  return {out, final_state, checkpoints};
}

template <class Exec>
Tensors delta_rule_backward(const Exec& ex, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& decay, const Tensor& beta, const Tensor& checkpoints,
                            const Tensor& dout) {
  const int64_t B = q.size(0), H = q.size(2), K = q.size(3), V = v.size(3);
  Tensors g{Tensor::empty(q.shape(), q.dtype(), ex.device()),
            Tensor::empty(k.shape(), q.dtype(), ex.device()),
            Tensor::empty(v.shape(), q.dtype(), ex.device()),
            Tensor::empty(decay.shape(), q.dtype(), ex.device()),
            Tensor::empty(beta.shape(), q.dtype(), ex.device())};
  if (B * H == 0 || q.size(1) == 0) return g;
  dispatch_float(q.dtype(), "delta_rule_backward", [&]<class T>() {
    Tensor scratch =
        Tensor::empty({B * H, DeltaRuleScratch<T>::elements(K, V)}, q.dtype(), ex.device());
    ex.launch(DeltaRuleBackwardKernel<T>{.in = delta_rule_inputs<T>(q, k, v, decay, beta),
                                         .checkpoints = checkpoints.data<T>(),
                                         .dout = dout.data<T>(),
                                         .dq = g[0].data<T>(),
                                         .dk = g[1].data<T>(),
                                         .dv = g[2].data<T>(),
                                         .ddecay = g[3].data<T>(),
                                         .dbeta = g[4].data<T>(),
                                         .scratch = scratch.data<T>()},
              std::min(B * H, kMaxBlocks));
  });
  return g;
}

}  // namespace reprise::cuda
