#pragma once
// for_each_run walks a shape over K operands with their own strides (in
// elements; 0 for a broadcast dim) and calls
//     fn(offsets, n, inner_strides)
// once per innermost run of n elements: offsets[k] is operand k's element
// offset of the run's first element, inner_strides[k] its stride along the
// run. Dims are coalesced first, so contiguous operands give long runs and
// the inner loop vectorises; long runs are cut into pieces (kRunPiece), and
// runs and pieces are split across threads. Each element is visited exactly
// once, so elementwise results do not depend on the thread count.

#include <algorithm>
#include <array>
#include <cstdint>

#include "engine/shape.h"
#include "engine/threads.h"

namespace reprise {

template <size_t K>
struct StridedLayout {
  Shape shape;                   // coalesced, outermost first
  std::array<Shape, K> strides;  // per operand, same length as shape
};

template <size_t K>
StridedLayout<K> coalesce(const Shape& shape, const std::array<Shape, K>& strides) {
  StridedLayout<K> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!out.shape.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < K; ++k) {
        mergeable = mergeable && out.strides[k].back() == strides[k][d] * shape[d];
      }
      if (mergeable) {
        out.shape.back() *= shape[d];
        for (size_t k = 0; k < K; ++k) out.strides[k].back() = strides[k][d];
        continue;
      }
    }
    out.shape.push_back(shape[d]);
    for (size_t k = 0; k < K; ++k) out.strides[k].push_back(strides[k][d]);
  }
  if (out.shape.empty()) {  // a scalar, or all dims of size 1
    out.shape.push_back(1);
    for (size_t k = 0; k < K; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// Runs are cut into pieces of at most kRunPiece elements, and a task is about
// kRunPiece elements: a contiguous tensor coalesces to a single run, and
// without the cut it would stay on one thread however large it is.
inline constexpr int64_t kRunPiece = int64_t(1) << 15;

template <size_t K, class F>
void for_each_run(const Shape& shape, const std::array<Shape, K>& strides, F&& fn) {
  if (numel(shape) == 0) return;
  StridedLayout<K> l = coalesce<K>(shape, strides);
  const int64_t nd = int64_t(l.shape.size());
  const int64_t inner = l.shape[nd - 1];
  const int64_t outer = numel(l.shape) / inner;
  std::array<int64_t, K> inner_strides;
  for (size_t k = 0; k < K; ++k) inner_strides[k] = l.strides[k][nd - 1];

  // Task t is piece t % pieces of run t / pieces.
  const int64_t piece = std::min(inner, kRunPiece);
  const int64_t pieces = (inner + piece - 1) / piece;
  const int64_t grain = std::max<int64_t>(1, kRunPiece / piece);
  threads::parallel_for(outer * pieces, grain, [&](int64_t begin, int64_t end) {
    // Multi-index of run `begin / pieces` over the outer dims.
    Shape index(nd, 0);
    for (int64_t d = nd - 2, rest = begin / pieces; d >= 0; --d) {
      index[d] = rest % l.shape[d];
      rest /= l.shape[d];
    }
    std::array<int64_t, K> offsets{};
    for (size_t k = 0; k < K; ++k) {
      for (int64_t d = 0; d < nd - 1; ++d) offsets[k] += index[d] * l.strides[k][d];
    }
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t % pieces * piece;
      std::array<int64_t, K> at = offsets;
      for (size_t k = 0; k < K; ++k) at[k] += first * inner_strides[k];
      fn(at, std::min(piece, inner - first), inner_strides);
      if (t % pieces != pieces - 1) continue;
      // The run is done: advance the outer multi-index by one (odometer).
      for (int64_t d = nd - 2; d >= 0; --d) {
        ++index[d];
        for (size_t k = 0; k < K; ++k) offsets[k] += l.strides[k][d];
        if (index[d] < l.shape[d]) break;
        for (size_t k = 0; k < K; ++k) offsets[k] -= l.strides[k][d] * l.shape[d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace reprise
