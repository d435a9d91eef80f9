#pragma once
// Elementwise loops of the CPU backend: a functor applied over operands of
// one shape with any strides (engine/strided_loop.h walks the runs and
// spreads them over threads). f32 and bf16 runs go 16 lanes at a time
// (cpu/vec.h) with a zero-padded last step; a strided operand is gathered
// into a contiguous block first, and a strided output scattered from one.
// Other dtypes (f64, the integer types) go one element at a time through
// the same functor, which gives the same bits. bf16 operands are stored
// bf16 and computed in f32: each value widened (exactly), each result
// rounded once.

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "cpu/vec.h"
#include "engine/strided_loop.h"
#include "engine/tensor.h"

REPRISE_CPU_BEGIN

// Whether the maps of T go 16 lanes at a time (f32 and bf16); the other
// dtypes go element by element.
template <class T>
inline constexpr bool kLaneMapped = std::is_same_v<T, float> || std::is_same_v<T, bfloat16>;

// out[m][j] = f(in[0][j], ..., in[N-1][j])[m] for j < n, f32 or bf16, every
// operand contiguous: 16 lanes at a time. Never inlined: the strided runs
// call the same copy, so that each functor is compiled once per type.
template <class T, size_t M, size_t N, class F>
__attribute__((noinline)) void map_contiguous(const std::array<T*, M>& out,
                                              const std::array<const T*, N>& in, int64_t n, F f) {
  for (int64_t j = 0; j < n; j += 16) {
    const int64_t lanes = std::min<int64_t>(16, n - j);
    const auto ys = [&]<size_t... I>(std::index_sequence<I...>) REPRISE_CPU_LAMBDA {
      return f(load_lanes(in[I] + j, lanes)...);
    }
    (std::make_index_sequence<N>());
    for (size_t m = 0; m < M; ++m) store_lanes(out[m] + j, ys[m], lanes);
  }
}

// out[m][j] = f(in[0][j], ..., in[N-1][j])[m] over one run of n elements,
// for M outputs from one pass over the inputs; st[m] is out[m]'s stride,
// st[M + i] in[i]'s. f32 and bf16 go through map_contiguous, an operand
// with another stride than 1 gathered into (an output scattered from) a
// contiguous block of kBlock values; f64 (gradient checks and references)
// and the integer types go element by element.
template <class T, size_t M, size_t N, class F>
void run_map_n(const std::array<T*, M>& out, const std::array<const T*, N>& in, int64_t n,
               const auto& st, F f) {
  if constexpr (kLaneMapped<T>) {
    bool unit = true;
    for (size_t i = 0; i < M + N; ++i) unit = unit && st[i] == 1;
    if (unit) return map_contiguous<T, M, N>(out, in, n, f);
    constexpr int64_t kBlock = 256;
    T blocks[M + N][kBlock];
    for (int64_t j = 0; j < n; j += kBlock) {
      const int64_t count = std::min(kBlock, n - j);
      std::array<T*, M> to;
      std::array<const T*, N> from;
      for (size_t i = 0; i < N; ++i) {
        const int64_t stride = st[M + i];
        from[i] = in[i] + j * stride;
        if (stride == 1) continue;
        if (stride == 0) {  // a broadcast value
          std::fill_n(blocks[M + i], count, from[i][0]);
        } else {
          for (int64_t l = 0; l < count; ++l) blocks[M + i][l] = from[i][l * stride];
        }
        from[i] = blocks[M + i];
      }
      for (size_t m = 0; m < M; ++m) to[m] = st[m] == 1 ? out[m] + j : blocks[m];
      map_contiguous<T, M, N>(to, from, count, f);
      for (size_t m = 0; m < M; ++m) {
        if (st[m] == 1) continue;
        for (int64_t l = 0; l < count; ++l) out[m][(j + l) * st[m]] = blocks[m][l];
      }
    }
  } else {
    using C = ComputeType<T>;
    for (int64_t j = 0; j < n; ++j) {
      const auto ys = [&]<size_t... I>(std::index_sequence<I...>) REPRISE_CPU_LAMBDA {
        return f(C(in[I][j * st[M + I]])...);
      }
      (std::make_index_sequence<N>());
      for (size_t m = 0; m < M; ++m) out[m][j * st[m]] = T(ys[m]);
    }
  }
}

// outs[m] = f(ins...)[m] elementwise, f returning std::array of M values;
// every tensor has outs[0]'s shape.
template <class T, size_t M, size_t N, class F>
void map_n_into(const std::array<Tensor, M>& outs, const std::array<Tensor, N>& ins, F f) {
  std::array<Shape, M + N> strides;
  std::array<T*, M> out_base;
  std::array<const T*, N> in_base;
  for (size_t m = 0; m < M; ++m) {
    strides[m] = outs[m].strides();
    out_base[m] = static_cast<T*>(outs[m].raw_data());
  }
  for (size_t i = 0; i < N; ++i) {
    strides[M + i] = ins[i].strides();
    in_base[i] = static_cast<const T*>(ins[i].raw_data());
  }
  for_each_run<M + N>(outs[0].shape(), strides, [&](auto off, int64_t n, auto st) {
    std::array<T*, M> o;
    std::array<const T*, N> at;
    for (size_t m = 0; m < M; ++m) o[m] = out_base[m] + off[m];
    for (size_t i = 0; i < N; ++i) at[i] = in_base[i] + off[M + i];
    run_map_n<T, M, N>(o, at, n, st, f);
  });
}

// out = f(ins...) elementwise; every tensor has out's shape.
template <class T, size_t N, class F>
void map_into(const Tensor& out, const std::array<Tensor, N>& ins, F f) {
  map_n_into<T, 1, N>({out}, ins,
                      [&f](auto... x) REPRISE_CPU_LAMBDA { return std::array{f(x...)}; });
}

// New contiguous tensors f(ins...)[m], m < M, shaped like ins[0].
template <class T, size_t M, size_t N, class F>
std::array<Tensor, M> map_n_new(const std::array<Tensor, N>& ins, F f) {
  std::array<Tensor, M> outs;
  for (Tensor& out : outs) out = Tensor::empty(ins[0].shape(), ins[0].dtype());
  map_n_into<T, M, N>(outs, ins, f);
  return outs;
}

// A new contiguous tensor f(ins...) shaped like ins[0].
template <class T, size_t N, class F>
Tensor map_new(const std::array<Tensor, N>& ins, F f) {
  return map_n_new<T, 1, N>(ins,
                            [&f](auto... x) REPRISE_CPU_LAMBDA { return std::array{f(x...)}; })[0];
}

REPRISE_CPU_END
