#pragma once
// Row reductions for the row-wise ops (softmax, cross_entropy, rmsnorm,
// layernorm): one contiguous row of n elements reduced by one thread.
// 16 independent partial results let the compiler vectorise without
// reassociation flags; they are combined in a fixed order, so a row's
// result never depends on the thread count.

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace reprise::ops::detail {

constexpr int kRowLanes = 16;

// sum of term(i) over i in [0, n), term returning T.
template <class T, class F>
T row_sum_of(int64_t n, F term) {
  T lanes[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) lanes[l] += term(i + l);
  }
  T s = 0;
  for (int l = 0; l < kRowLanes; ++l) s += lanes[l];
  for (; i < n; ++i) s += term(i);
  return s;
}

// max of x[0..n), n >= 1. A NaN may be skipped here; the callers still
// propagate it through their sum of exponentials.
template <class T>
T row_max(const T* x, int64_t n) {
  T lanes[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l) lanes[l] = x[0];
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
  }
  T m = lanes[0];
  for (int l = 1; l < kRowLanes; ++l) m = std::max(m, lanes[l]);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// Rows per parallel task so that a task touches about 16K elements.
inline int64_t row_grain(int64_t row_length) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_length, 1));
}

}  // namespace reprise::ops::detail
