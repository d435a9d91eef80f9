#pragma once
// Element offsets of N operands of one shape, each with its own strides,
// from a row-major linear index: what a kernel thread needs to walk tensors
// of any layout. Dims are coalesced on the host first (engine/strided_loop.h)
// so that contiguous operands cost one multiply per element, not a division
// per dim.

#include <array>
#include <cstdint>

#include "base/error.h"
#include "base/hd.h"
#include "engine/strided_loop.h"
#include "engine/tensor.h"

namespace reprise::cuda {

inline constexpr int kMaxDims = 10;

template <int N>
struct Strided {
  int nd;  // >= 1
  int64_t size[kMaxDims];
  int64_t stride[N][kMaxDims];

  // off[k] = operand k's element offset of linear index i.
  REPRISE_HD void offsets(int64_t i, int64_t (&off)[N]) const {
    if (nd == 1) {
      for (int k = 0; k < N; ++k) off[k] = i * stride[k][0];
      return;
    }
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t at = i % size[d];
      i /= size[d];
      for (int k = 0; k < N; ++k) off[k] += at * stride[k][d];
    }
  }
};

// The layout of operands of `shape` with the given strides, coalesced.
template <int N>
Strided<N> strided(const Shape& shape, const std::array<Shape, N>& strides) {
  const StridedLayout<N> l = coalesce<N>(shape, strides);
  REPRISE_CHECK(l.shape.size() <= size_t(kMaxDims), "cuda: a layout of ", l.shape.size(),
                " dims that do not merge (shape ", to_string(shape), "); at most ", kMaxDims,
                " are supported");
  Strided<N> s{};
  s.nd = int(l.shape.size());
  for (int d = 0; d < s.nd; ++d) {
    s.size[d] = l.shape[size_t(d)];
    for (int k = 0; k < N; ++k) s.stride[k][d] = l.strides[size_t(k)][size_t(d)];
  }
  return s;
}

// Grid-stride loop over [0, n) for thread t of a block of Threads: calls
// body(i) for i = block * Threads + t, then every blocks * Threads after.
template <int Threads, class Ctx, class Body>
REPRISE_HD void grid_stride(const Ctx& ctx, int t, int64_t n, Body&& body) {
  for (int64_t i = ctx.block() * Threads + t; i < n; i += ctx.blocks() * Threads) body(i);
}

}  // namespace reprise::cuda
