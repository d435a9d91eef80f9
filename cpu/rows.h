#pragma once
// Row reductions of the CPU backend (softmax, cross_entropy, the norms,
// attention): one contiguous row of n values by one thread, in 16 lanes.
// Lane l accumulates the terms i with i % 16 == l in order of i (the last,
// partial step adds zeros in its missing lanes), and the lanes are folded
// in cpu/vec.h's fixed order: a row's result is the same at every CPU
// capability and thread count.

#include <cstdint>

#include "cpu/vec.h"

REPRISE_CPU_BEGIN

// Lanes [0, n) all ones, the rest zero.
template <class T>
REPRISE_CPU_INLINE M16<T> first_lanes(int64_t n) {
  T index[16];
  for (int l = 0; l < 16; ++l) index[l] = T(l);
  return V16<T>::load(index) < V16<T>::splat(double(n));
}

// 16 values of p starting at i, of which `valid` (<= 16) are inside the row;
// the others read as 0.
template <class T>
REPRISE_CPU_INLINE V16<T> row_load(const T* p, int64_t i, int64_t valid) {
  return valid == 16 ? V16<T>::load(p + i) : V16<T>::load_first(p + i, valid);
}

// The sum over i in [0, n) of term(i, valid), where term returns the 16
// terms i .. i + 15 as a V16 (lanes at or past `valid` are ignored).
template <class T, class Term>
T row_sum(int64_t n, Term term) {
  V16<T> acc = V16<T>::splat(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = acc + term(i, int64_t(16));
  if (i < n) acc = acc + select(first_lanes<T>(n - i), term(i, n - i), V16<T>::splat(0));
  return fold_sum(acc);
}

// The largest of x[0, n), n >= 1 (a NaN may be skipped; callers propagate
// it through their sum of exponentials); bf16 values compare widened.
template <class S, class T = ComputeType<S>>
T row_max(const S* x, int64_t n) {
  V16<T> acc = V16<T>::splat(T(x[0]));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = vmax(load_lanes(x + i, 16), acc);
  if (i < n) acc = select(first_lanes<T>(n - i), vmax(load_lanes(x + i, n - i), acc), acc);
  return fold_max(acc);
}

// Calls step(i, valid) for the 16-element steps of a row of n: valid = 16,
// then fewer for the last.
template <class Step>
REPRISE_CPU_INLINE void row_steps(int64_t n, Step step) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(i, int64_t(16));
  if (i < n) step(i, n - i);
}

// Stores the first `valid` lanes of v at p + i.
template <class T>
REPRISE_CPU_INLINE void row_store(T* p, int64_t i, int64_t valid, V16<T> v) {
  if (valid == 16) {
    v.store(p + i);
  } else {
    v.store_first(p + i, valid);
  }
}

// Rows per parallel task so that a task touches about 16K elements.
inline int64_t row_grain(int64_t row_length) {
  return row_length >= 16384 ? 1 : 16384 / (row_length > 0 ? row_length : 1);
}

REPRISE_CPU_END
