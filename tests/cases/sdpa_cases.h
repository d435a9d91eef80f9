#pragma once
// The sizes and options of fused attention's cases (tests/cases/attention.cpp),
// which the attention tests use for their own inputs too.

#include <string>

#include "ops/attention.h"
#include "rng/philox.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {

struct Sizes {
  int64_t B, Hq, Hkv, T, S, D, Dv;
};

inline constexpr Sizes kSmall{2, 4, 2, 7, 7, 5, 5};  // B, Hq, Hkv, T, S, D, Dv
inline constexpr Sizes kModel{perf_sizes::B, perf_sizes::Hq, perf_sizes::Hkv, perf_sizes::T,
                              perf_sizes::T, perf_sizes::D,  perf_sizes::D};

// A fixed reservation that covers every (b, h, i, j) of z.
inline rng::Reservation fixed_words(Sizes z, uint64_t seed) {
  return {.seed = seed,
          .subsequence = 3,
          .offset = 8,
          .count = ops::sdpa_dropout_words(z.B, z.Hq, z.T, z.S)};
}

// Dropout p from a fixed reservation that covers z (and every smaller size).
inline ops::AttentionOptions dropout_options(double p, Sizes z, bool causal, int64_t offset = 0,
                                             int64_t window = 0) {
  return {.causal = causal,
          .causal_offset = offset,
          .window = window,
          .dropout_p = p,
          .dropout_rng = fixed_words(z, 2026)};
}

inline ops::AttentionOptions window_options(int64_t window, int64_t offset = 0) {
  return {.causal = true, .causal_offset = offset, .window = window};
}

// q (B, Hq, T, D), k (B, Hkv, S, D) and v (B, Hkv, S, Dv) in z, from `make`.
template <class Make>
Inputs sdpa_inputs(Sizes z, Make make) {
  return {make(Shape{z.B, z.Hq, z.T, z.D}, 51), make(Shape{z.B, z.Hkv, z.S, z.D}, 52),
          make(Shape{z.B, z.Hkv, z.S, z.Dv}, 53)};
}

// q, k and v at the model's sizes (kModel), for a timed case.
inline PerfInputs sdpa_perf(std::string shape) {
  return {std::move(shape), [] {
            return sdpa_inputs(kModel,
                               [](const Shape& s, uint64_t seed) { return perf_input(s, seed); });
          }};
}

// Recorded as sdpa, or sdpa_dropout when opt has a dropout.
inline OpCase sdpa_case(const std::string& name, Sizes z, ops::AttentionOptions opt,
                        std::optional<PerfInputs> perf = {}) {
  return {
      (opt.dropout_p > 0 ? "sdpa_dropout/" : "sdpa/") + name,
      [z] { return sdpa_inputs(z, [](const Shape& s, uint64_t seed) { return param(s, seed); }); },
      [opt](const Inputs& in) {
        return ops::scaled_dot_product_attention(in[0], in[1], in[2], opt);
      },
      {},
      std::move(perf)};
}

// With attention sinks: a fourth input, the (Hq) sinks.
inline OpCase sdpa_sinks_case(const std::string& name, Sizes z, ops::AttentionOptions opt) {
  return {(opt.dropout_p > 0 ? "sdpa_dropout/" : "sdpa/") + name,
          [z] {
            Inputs in =
                sdpa_inputs(z, [](const Shape& s, uint64_t seed) { return param(s, seed); });
            in.push_back(param({z.Hq}, 57));
            return in;
          },
          [opt](const Inputs& in) {
            ops::AttentionOptions with_sinks = opt;
            with_sinks.sinks = in[3];
            return ops::scaled_dot_product_attention(in[0], in[1], in[2], with_sinks);
          }};
}

}  // namespace reprise::testing
