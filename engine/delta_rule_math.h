#pragma once
// One step of the gated delta rule on one column of the state, written
// once as REPRISE_HD code (as engine/functors.h is for the elementwise
// ops): the CPU kernel (cpu/delta_rule.cpp) and the CUDA one
// (cuda/kernels/delta_rule.h) both call it, forward and in the backward's
// recompute, so their bits are the same by construction.

#include <cstdint>

#include "base/hd.h"

namespace reprise {

// Column j of the (K, V) state S (row-major), for one position with query
// q, key k (K), value v_j, decay a and beta:
//   S'[:, j] = S[:, j] a,  m = S'[:, j] . k,  d = (v_j - m) beta,
//   S[:, j] = S'[:, j] + k d,  returns S[:, j] . q
// each sum in order of the row index.
template <class T>
REPRISE_HD T delta_rule_column(T* S, int64_t K, int64_t V, int64_t j, const T* q, const T* k, T v,
                               T a, T beta) {
  T m = 0;
  for (int64_t i = 0; i < K; ++i) {
    S[i * V + j] = S[i * V + j] * a;
    m = m + S[i * V + j] * k[i];
  }
  const T d = (v - m) * beta;
  T o = 0;
  for (int64_t i = 0; i < K; ++i) {
    S[i * V + j] = S[i * V + j] + k[i] * d;
    o = o + S[i * V + j] * q[i];
  }
  return o;
}

}  // namespace reprise
