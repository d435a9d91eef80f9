// The gated delta rule on the CPU (engine/kernels/delta_rule.def): one
// task per (batch, head), positions in order. Each column of the (K, V)
// state evolves on its own by engine/delta_rule_math.h's step, which
// cuda/kernels/delta_rule.h's threads run too, and the backward's sums run
// in order of their index as the CUDA phases do: the same bits on both,
// and at every CPU capability (scalar code, no FMA contraction).
#include <algorithm>
#include <vector>

#include "cpu/backend.h"
#include "engine/delta_rule_math.h"
#include "engine/threads.h"

REPRISE_CPU_BEGIN
namespace {

// One (b, h) sequence's rows: position t's q or k at qk + t * qk_stride.
template <class T>
struct Sequence {
  const T *q, *k, *v, *decay, *beta;
  int64_t qk_stride, v_stride, gate_stride;  // between positions
};

template <class T>
Sequence<T> sequence(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& decay,
                     const Tensor& beta, int64_t b, int64_t h) {
  const int64_t T_ = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const int64_t row = b * T_ * H + h;
  return {q.data<T>() + row * K,
          k.data<T>() + row * K,
          v.data<T>() + row * V,
          decay.data<T>() + row,
          beta.data<T>() + row,
          H * K,
          H * V,
          H};
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& decay,
             const Tensor& beta, const Tensor& state, Tensor& out, Tensor& final_state,
             Tensor& checkpoints) {
  const int64_t B = q.size(0), T_ = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const int64_t blocks = checkpoints.size(2), KV = K * V;
  threads::parallel_for(B * H, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t bh = s0; bh < s1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const Sequence<T> s = sequence<T>(q, k, v, decay, beta, b, h);
      T* S = final_state.data<T>() + bh * KV;
      if (state.defined()) {
        std::copy_n(state.data<T>() + bh * KV, KV, S);
      } else {
        std::fill_n(S, KV, T(0));
      }
      T* o = out.data<T>() + b * T_ * H * V + h * V;
      for (int64_t t = 0; t < T_; ++t) {
        if (t % kDeltaRuleBlock == 0) {
          std::copy_n(S, KV, checkpoints.data<T>() + (bh * blocks + t / kDeltaRuleBlock) * KV);
        }
        const T* qt = s.q + t * s.qk_stride;
        const T* kt = s.k + t * s.qk_stride;
        const T* vt = s.v + t * s.v_stride;
        const T a = s.decay[t * s.gate_stride], be = s.beta[t * s.gate_stride];
        for (int64_t j = 0; j < V; ++j)
          o[t * H * V + j] = delta_rule_column(S, K, V, j, qt, kt, vt[j], a, be);
      }
    }
  });
}

template <class T>
void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& decay,
              const Tensor& beta, const Tensor& checkpoints, const Tensor& dout, Tensors& g) {
  const int64_t B = q.size(0), T_ = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const int64_t blocks = checkpoints.size(2), KV = K * V;
  threads::parallel_for(B * H, 1, [&](int64_t s0, int64_t s1) {
    // states[r]: the state after position t0 + r - 1 of the current block
    // (states[0] its checkpoint); dS the gradient at the state.
    const size_t k_n = size_t(K), v_n = size_t(V), kv_n = size_t(KV);
    std::vector<T> states((size_t(kDeltaRuleBlock) + 1) * kv_n), dS(kv_n);
    std::vector<T> m(v_n), d(v_n), dd(v_n), dm(v_n), rows(k_n);
    for (int64_t bh = s0; bh < s1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const Sequence<T> s = sequence<T>(q, k, v, decay, beta, b, h);
      const int64_t row = b * T_ * H + h;
      const T* go = dout.data<T>() + row * V;
      T* dq = g[0].data<T>() + row * K;
      T* dk = g[1].data<T>() + row * K;
      T* dv = g[2].data<T>() + row * V;
      T* ddecay = g[3].data<T>() + row;
      T* dbeta = g[4].data<T>() + row;
      std::fill(dS.begin(), dS.end(), T(0));
      for (int64_t blk = blocks - 1; blk >= 0; --blk) {
        const int64_t t0 = blk * kDeltaRuleBlock, t1 = std::min(T_, t0 + kDeltaRuleBlock);
        std::copy_n(checkpoints.data<T>() + (bh * blocks + blk) * KV, KV, states.data());
        for (int64_t t = t0; t < t1; ++t) {
          T* S = states.data() + (t - t0 + 1) * KV;
          std::copy_n(S - KV, KV, S);
          const T a = s.decay[t * s.gate_stride], be = s.beta[t * s.gate_stride];
          for (int64_t j = 0; j < V; ++j) {
            delta_rule_column(S, K, V, j, s.q + t * s.qk_stride, s.k + t * s.qk_stride,
                              s.v[t * s.v_stride + j], a, be);
          }
        }
        for (int64_t t = t1 - 1; t >= t0; --t) {
          const T* prev = states.data() + (t - t0) * KV;  // S before position t
          const T* S = prev + KV;                         // and after it
          const T* qt = s.q + t * s.qk_stride;
          const T* kt = s.k + t * s.qk_stride;
          const T* vt = s.v + t * s.v_stride;
          const T* got = go + t * H * V;
          const T a = s.decay[t * s.gate_stride], be = s.beta[t * s.gate_stride];
          // Columns: m and d again, dS += q dout^T, dd = dS^T k.
          for (int64_t j = 0; j < V; ++j) {
            T mj = 0;
            for (int64_t i = 0; i < K; ++i) mj = mj + (prev[i * V + j] * a) * kt[i];
            m[size_t(j)] = mj;
            d[size_t(j)] = (vt[j] - mj) * be;
            T ddj = 0;
            for (int64_t i = 0; i < K; ++i) {
              dS[size_t(i * V + j)] = dS[size_t(i * V + j)] + qt[i] * got[j];
              ddj = ddj + dS[size_t(i * V + j)] * kt[i];
            }
            dd[size_t(j)] = ddj;
            dv[t * H * V + j] = ddj * be;
            dm[size_t(j)] = -(ddj * be);
          }
          // Rows: dq = S dout, dk = dS d.
          for (int64_t i = 0; i < K; ++i) {
            T dqi = 0, dki = 0;
            for (int64_t j = 0; j < V; ++j) {
              dqi = dqi + S[i * V + j] * got[j];
              dki = dki + dS[size_t(i * V + j)] * d[size_t(j)];
            }
            dq[t * H * K + i] = dqi;
            dk[t * H * K + i] = dki;
          }
          // Columns: dS += k dm^T.
          for (int64_t j = 0; j < V; ++j) {
            for (int64_t i = 0; i < K; ++i) {
              dS[size_t(i * V + j)] = dS[size_t(i * V + j)] + kt[i] * dm[size_t(j)];
            }
          }
          // Rows: dk += S' dm, and each row's share of ddecay.
          for (int64_t i = 0; i < K; ++i) {
            T dki = 0, r = 0;
            for (int64_t j = 0; j < V; ++j) {
              dki = dki + (prev[i * V + j] * a) * dm[size_t(j)];
              r = r + dS[size_t(i * V + j)] * prev[i * V + j];
            }
            dk[t * H * K + i] = dk[t * H * K + i] + dki;
            rows[size_t(i)] = r;
          }
          T db = 0, da = 0;
          for (int64_t j = 0; j < V; ++j) db = db + dd[size_t(j)] * (vt[j] - m[size_t(j)]);
          for (int64_t i = 0; i < K; ++i) da = da + rows[size_t(i)];
          dbeta[t * H] = db;
          ddecay[t * H] = da;
          for (int64_t e = 0; e < KV; ++e) dS[size_t(e)] = dS[size_t(e)] * a;
        }
      }
    }
  });
}

}  // namespace

Tensors CpuBackend::delta_rule(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& decay, const Tensor& beta, const Tensor& state) {
  const int64_t B = q.size(0), T_ = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const int64_t blocks = (T_ + kDeltaRuleBlock - 1) / kDeltaRuleBlock;
  Tensor out = Tensor::empty({B, T_, H, V}, q.dtype());
  Tensor final_state = Tensor::empty({B, H, K, V}, q.dtype());
  Tensor checkpoints = Tensor::empty({B, H, blocks, K, V}, q.dtype());
  dispatch_float(q.dtype(), "delta_rule", [&]<class T>() {
    forward<T>(q, k, v, decay, beta, state, out, final_state, checkpoints);
  });
  return {out, final_state, checkpoints};
}

Tensors CpuBackend::delta_rule_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& decay, const Tensor& beta,
                                        const Tensor& checkpoints, const Tensor& dout) {
  Tensors g{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(k.shape(), q.dtype()),
            Tensor::empty(v.shape(), q.dtype()), Tensor::empty(decay.shape(), q.dtype()),
            Tensor::empty(beta.shape(), q.dtype())};
  dispatch_float(q.dtype(), "delta_rule_backward",
                 [&]<class T>() { backward<T>(q, k, v, decay, beta, checkpoints, dout, g); });
  return g;
}

REPRISE_CPU_END
