#pragma once
// Elementwise loops of the CPU backend: a functor applied over operands of
// one shape with any strides (engine/strided_loop.h walks the runs and
// spreads them over threads). Contiguous float runs go 16 lanes at a time
// (cpu/vec.h) with a zero-padded last step; other runs go one element at a
// time through the same functor, which gives the same bits.

#include <array>
#include <cstdint>
#include <type_traits>

#include "cpu/vec.h"
#include "engine/strided_loop.h"
#include "engine/tensor.h"

REPRISE_CPU_BEGIN

// out[j] = f(in[0][j], ..., in[N-1][j]) over one run of n elements; st[0] is
// out's stride, st[1 + i] in[i]'s.
template <class T, size_t N, class F>
void run_map(T* out, const std::array<const T*, N>& in, int64_t n, const auto& st, F f) {
  bool unit = st[0] == 1;
  for (size_t i = 0; i < N; ++i) unit = unit && st[1 + i] == 1;
  if constexpr (std::is_floating_point_v<T>) {
    if (unit) {
      auto lanes = [&](int64_t j, auto load) {
        return [&]<size_t... I>(std::index_sequence<I...>) { return f(load(in[I] + j)...); }
        (std::make_index_sequence<N>());
      };
      int64_t j = 0;
      for (; j + 16 <= n; j += 16)
        lanes(j, [](const T* p) { return V16<T>::load(p); }).store(out + j);
      if (j < n) {
        const int64_t rest = n - j;
        lanes(j, [rest](const T* p) {
          return V16<T>::load_first(p, rest);
        }).store_first(out + j, rest);
      }
      return;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    out[j * st[0]] = [&]<size_t... I>(std::index_sequence<I...>) {
      return f(in[I][j * st[1 + I]]...);
    }
    (std::make_index_sequence<N>());
  }
}

// out = f(ins...) elementwise; every tensor has out's shape.
template <class T, size_t N, class F>
void map_into(const Tensor& out, const std::array<Tensor, N>& ins, F f) {
  std::array<Shape, N + 1> strides;
  strides[0] = out.strides();
  std::array<const T*, N> base;
  for (size_t i = 0; i < N; ++i) {
    strides[1 + i] = ins[i].strides();
    base[i] = static_cast<const T*>(ins[i].raw_data());
  }
  T* o = static_cast<T*>(out.raw_data());
  for_each_run<N + 1>(out.shape(), strides, [&](auto off, int64_t n, auto st) {
    std::array<const T*, N> at;
    for (size_t i = 0; i < N; ++i) at[i] = base[i] + off[1 + i];
    run_map<T, N>(o + off[0], at, n, st, f);
  });
}

// A new contiguous tensor f(ins...) shaped like ins[0].
template <class T, size_t N, class F>
Tensor map_new(const std::array<Tensor, N>& ins, F f) {
  Tensor out = Tensor::empty(ins[0].shape(), ins[0].dtype());
  map_into<T, N>(out, ins, f);
  return out;
}

REPRISE_CPU_END
