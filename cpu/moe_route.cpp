// moe_route on the CPU: the choice of each token's experts
// (engine/route_choice.h), gates, and the counting sort of assignments by
// expert; and its backward.
//
// Per token n with chosen scores v_j (j < k) at experts i_j and scale c:
//   S = sum_j v_j,  g_j = (v_j / S) c (renormalize) or v_j c
// and the output weights are the g of the kept assignments in dispatch
// order. Backward, with dg scattered back to (N, k) (zero where dropped):
//   renormalize: dv_j = c ((dg_j - sum_l dg_l v_l / S) / S),  else dv_j = c dg_j
//   dscores[n, i_j] = dv_j, zero elsewhere.
#include <cmath>
#include <vector>

#include "cpu/backend.h"
#include "engine/route_choice.h"

REPRISE_CPU_BEGIN
namespace {

template <class T>
Tensors route(const Tensor& scores, const Tensor& bias_in, const RouteParams& rp) {
  const Tensor s = scores.contiguous();
  const int64_t N = s.size(0), E = s.size(1), k = rp.k, capacity = rp.capacity;
  const T* ps = s.data<T>();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  const T* pb = bias.defined() ? bias.data<T>() : nullptr;
  for (int64_t e = 0; pb && e < E; ++e) {
    REPRISE_CHECK(!std::isnan(pb[e]), "moe_route: bias of expert ", e, " is NaN");
  }
  Tensor indices = Tensor::empty({N, k}, DType::i64);
  Tensor top = Tensor::empty({N, k}, s.dtype());  // the chosen scores, best first
  Tensor margin = Tensor::empty({N}, DType::i64);
  int64_t* pi = indices.data<int64_t>();
  T* pt = top.data<T>();
  int64_t* pm = margin.data<int64_t>();
  std::vector<T> chosen(static_cast<size_t>(k));  // a token's choice values
  for (int64_t n = 0; n < N; ++n) {
    const T* row = ps + n * E;
    for (int64_t e = 0; e < E; ++e) {
      REPRISE_CHECK(!std::isnan(row[e]), "moe_route: score of token ", n, " for expert ", e,
                    " is NaN (scores ", scores.describe(), ")");
    }
    int64_t* idx = pi + n * k;
    pm[n] = route::choose_experts(row, pb, E, k, rp.n_group, rp.topk_group, idx, chosen.data());
    for (int64_t j = 0; j < k; ++j) pt[n * k + j] = row[idx[j]];
  }
  // Counting sort by expert, stable in (token, rank) order; over capacity
  // an expert keeps its earliest tokens.
  Tensor routed = Tensor::zeros({E}, DType::i64);
  Tensor counts = Tensor::zeros({E}, DType::i64);
  int64_t* pr = routed.data<int64_t>();
  int64_t* pc = counts.data<int64_t>();
  for (int64_t a = 0; a < N * k; ++a) {
    const int64_t e = pi[a];
    if (capacity < 0 || pr[e] < capacity) ++pc[e];
    ++pr[e];
  }
  std::vector<int64_t> next(size_t(E), 0);  // write position of each expert's block
  int64_t M = 0;
  for (int64_t e = 0; e < E; ++e) {
    next[size_t(e)] = M;
    M += pc[e];
  }
  Tensor weights = Tensor::empty({M}, s.dtype());
  Tensor token = Tensor::empty({M}, DType::i64);
  Tensor slot = Tensor::empty({M}, DType::i64);
  T* pw = weights.data<T>();
  int64_t* pk = token.data<int64_t>();
  int64_t* pl = slot.data<int64_t>();
  std::vector<int64_t> seen(size_t(E), 0);
  const T scale = T(rp.scale);
  for (int64_t n = 0; n < N; ++n) {
    T sum = T(0);
    for (int64_t j = 0; j < k; ++j) sum += pt[n * k + j];
    for (int64_t j = 0; j < k; ++j) {
      const int64_t a = n * k + j, e = pi[a];
      if (seen[size_t(e)]++ >= pc[e]) continue;  // dropped
      const int64_t m = next[size_t(e)]++;
      pw[m] = (rp.renormalize ? pt[a] / sum : pt[a]) * scale;
      pk[m] = n;
      pl[m] = a;
    }
  }
  return Tensors{weights, indices, token, counts, routed, margin, slot, top};
}

template <class T>
Tensor route_backward(const Tensor& gw, const Tensor& indices, const Tensor& slot,
                      const Tensor& top, int64_t E, const RouteParams& rp) {
  const int64_t N = indices.size(0), k = indices.size(1), M = slot.size(0);
  const Tensor g = gw.contiguous();
  std::vector<T> gg(size_t(N * k), T(0));  // dg at (N, k), zero where dropped
  const T* pg = g.data<T>();
  const int64_t* pl = slot.data<int64_t>();
  for (int64_t m = 0; m < M; ++m) gg[size_t(pl[m])] = pg[m];
  Tensor dx = Tensor::zeros({N, E}, gw.dtype());
  T* pd = dx.data<T>();
  const T* pt = top.data<T>();
  const int64_t* pi = indices.data<int64_t>();
  const T scale = T(rp.scale);
  for (int64_t n = 0; n < N; ++n) {
    const T* v = pt + n * k;
    const T* d = gg.data() + n * k;
    T sum = T(0), dot = T(0);
    for (int64_t j = 0; j < k; ++j) sum += v[j];
    for (int64_t j = 0; j < k; ++j) dot += d[j] * (v[j] / sum);
    for (int64_t j = 0; j < k; ++j) {
      pd[n * E + pi[n * k + j]] = scale * (rp.renormalize ? (d[j] - dot) / sum : d[j]);
    }
  }
  return dx;
}

}  // namespace

Tensors CpuBackend::moe_route(const Tensor& scores, const Tensor& bias, const RouteParams& params) {
  return dispatch_float(scores.dtype(), "moe_route",
                        [&]<class T>() { return route<T>(scores, bias, params); });
}

Tensor CpuBackend::moe_route_backward(const Tensor& grad_weights, const Tensor& indices,
                                      const Tensor& slot, const Tensor& top, int64_t E,
                                      const RouteParams& params) {
  return dispatch_float(grad_weights.dtype(), "moe_route", [&]<class T>() {
    return route_backward<T>(grad_weights, indices, slot, top, E, params);
  });
}

REPRISE_CPU_END
