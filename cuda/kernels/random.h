#pragma once
// Random fills and dropout. Element i is the function rng/distributions.h
// gives of the words it assigns to it (word offset + i for float uniforms
// and Bernoulli draws, pairs for Box-Muller, ...), computed by the same
// REPRISE_HD code the CPU backend runs, so a reservation gives the CPU's
// bits here: dropout replays the same mask on either device.
//
// A thread takes the elements of 4 consecutive words of its reservation:
// one Philox block when the reservation starts on a block, two otherwise.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/kernel.h"
#include "engine/backend.h"
#include "engine/tensor.h"
#include "rng/distributions.h"
#include "rng/philox.h"

namespace reprise::cuda {

// Words first .. first + 3 of a stream.
struct Words4 {
  uint64_t seed, subsequence;
  REPRISE_HD void operator()(uint64_t first, uint32_t (&w)[4]) const {
    const rng::Block b0 = rng::stream_block(seed, subsequence, first >> 2);
    const int lane = int(first & 3);
    if (lane == 0) {
      for (int i = 0; i < 4; ++i) w[i] = b0.w[i];
      return;
    }
    const rng::Block b1 = rng::stream_block(seed, subsequence, (first >> 2) + 1);
    for (int i = 0; i < 4; ++i) w[i] = i + lane < 4 ? b0.w[i + lane] : b1.w[i + lane - 4];
  }
};

enum class Draw : uint8_t { uniform, normal, bernoulli, dropout };

// Element i of out from its words: uniform (fma(u, a, b)), normal
// (fma(z, a, b)), bernoulli (u <= threshold), dropout (in * a where kept).
template <class T, Draw D>
struct RandomKernel {
  static constexpr int kThreads = 256;
  // Elements per 4 words: a T uniform takes 4 / sizeof(T) words ... as
  // rng/distributions.h lists them.
  static constexpr int64_t kPerGroup = D == Draw::uniform
                                           ? (sizeof(T) == 4 ? 4 : 2)
                                           : (D == Draw::normal ? (sizeof(T) == 4 ? 4 : 2) : 4);
  T* out;
  const T* in;  // dropout's input
  int64_t n;
  Words4 words;
  uint64_t offset;
  T a, b;
  float threshold;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    const int64_t groups = (n + kPerGroup - 1) / kPerGroup;
    ctx.threads([&](int t) {
      for (int64_t g = ctx.block() * kThreads + t; g < groups; g += ctx.blocks() * kThreads) {
        uint32_t w[4];
        words(offset + 4 * uint64_t(g), w);
        const int64_t i0 = g * kPerGroup;
        if constexpr (D == Draw::uniform) {
          for (int e = 0; e < kPerGroup && i0 + e < n; ++e) {
            if constexpr (sizeof(T) == 4) {
              out[i0 + e] = std::fma(rng::uniform_float(w[e]), a, b);
            } else {
              out[i0 + e] = std::fma(rng::uniform_double(w[2 * e], w[2 * e + 1]), a, b);
            }
          }
        } else if constexpr (D == Draw::normal) {
          T z[4];
          if constexpr (sizeof(T) == 4) {
            rng::box_muller(w[0], w[1], z[0], z[1]);
            rng::box_muller(w[2], w[3], z[2], z[3]);
          } else {
            rng::box_muller(w[0], w[1], w[2], w[3], z[0], z[1]);
          }
          for (int e = 0; e < kPerGroup && i0 + e < n; ++e) out[i0 + e] = std::fma(z[e], a, b);
        } else {
          for (int e = 0; e < 4 && i0 + e < n; ++e) {
            const bool kept = rng::bernoulli(w[e], threshold);
            if constexpr (D == Draw::bernoulli) {
              out[i0 + e] = kept ? T(1) : T(0);
            } else {
              out[i0 + e] = kept ? in[i0 + e] * a : T(0);
            }
          }
        }
      }
    });
  }
};

inline void check_words(const char* op, int64_t n, uint64_t words, const rng::Reservation& r) {
  REPRISE_CHECK(r.count >= words, op, ": ", n, " elements need ", words, " words but ",
                rng::to_string(r), " holds ", r.count);
}

template <class T, Draw D, class Exec>
void random_fill(const Exec& ex, T* out, const T* in, int64_t n, const rng::Reservation& r, T a,
                 T b, float threshold = 0) {
  using K = RandomKernel<T, D>;
  const int64_t groups = (n + K::kPerGroup - 1) / K::kPerGroup;
  ex.launch(K{.out = out,
              .in = in,
              .n = n,
              .words = {r.seed, r.subsequence},
              .offset = r.offset,
              .a = a,
              .b = b,
              .threshold = threshold},
            blocks_for(groups, K::kThreads));
}

template <class Exec>
void fill_uniform(const Exec& ex, const Tensor& t, const rng::Reservation& r, double low,
                  double high) {
  dispatch_float(t.dtype(), "fill_uniform", [&]<class T>() {
    const int64_t n = t.numel();
    check_words("fill_uniform", n, rng::uniform_words<T>(uint64_t(n)), r);
    random_fill<T, Draw::uniform>(ex, t.data<T>(), nullptr, n, r, T(high - low), T(low));
  });
}

template <class Exec>
void fill_normal(const Exec& ex, const Tensor& t, const rng::Reservation& r, double mean,
                 double std) {
  dispatch_float(t.dtype(), "fill_normal", [&]<class T>() {
    const int64_t n = t.numel();
    check_words("fill_normal", n, rng::normal_words<T>(uint64_t(n)), r);
    random_fill<T, Draw::normal>(ex, t.data<T>(), nullptr, n, r, T(std), T(mean));
  });
}

template <class Exec>
void fill_bernoulli(const Exec& ex, const Tensor& t, const rng::Reservation& r, double p) {
  dispatch_float(t.dtype(), "fill_bernoulli", [&]<class T>() {
    const int64_t n = t.numel();
    check_words("fill_bernoulli", n, rng::bernoulli_words(uint64_t(n)), r);
    random_fill<T, Draw::bernoulli>(ex, t.data<T>(), nullptr, n, r, T(0), T(0),
                                    rng::bernoulli_threshold(p));
  });
}

template <class Exec>
Tensor dropout(const Exec& ex, const Tensor& x_in, double p, const rng::Reservation& r) {
  const Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), ex.device());
  dispatch_float(x.dtype(), "dropout", [&]<class T>() {
    const int64_t n = x.numel();
    check_words("dropout", n, rng::bernoulli_words(uint64_t(n)), r);
    // p == 1 keeps nothing, so the infinite scale is never used.
    const T scale = p < 1.0 ? T(1.0 / (1.0 - p)) : T(0);
    random_fill<T, Draw::dropout>(ex, out.data<T>(), x.data<T>(), n, r, scale, T(0),
                                  rng::bernoulli_threshold(1.0 - p));
  });
  return out;
}

}  // namespace reprise::cuda
