#pragma once
// CPU fills of raw buffers from a reservation. Element i is a function of the
// words distributions.h assigns to it (word offset + i for float uniforms and
// Bernoulli draws) and of nothing else: not of the thread count, the chunking
// or the vector width. A fill runs in chunks whose words are generated into
// an L1-resident buffer and transformed from there (with AVX-512, f32 uniform
// and dropout on a block-aligned reservation use each 16 words in registers
// as Philox makes them instead); outputs larger than 16 MiB are written with
// non-temporal stores.
//
// rng is the lowest layer and has no threads of its own: a fill spreads its
// chunks over threads through the `parallel` argument, which ops/ sets to the
// engine's pool (threads::parallel_for); without it the fill runs on the
// calling thread.
//
// Each function checks that the reservation holds enough words (see
// uniform_words, normal_words, bernoulli_words) and throws reprise::Error if
// not.

#include <cstdint>
#include <functional>

#include "rng/reservation.h"

namespace reprise::rng {

// parallel(n, grain, body) must call body(begin, end) on ranges that cover
// [0, n) exactly once, from any threads, and return when all calls have
// returned (the signature of threads::parallel_for). A fill calls it only for
// outputs large enough to share.
using ParallelFor = void (*)(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& body);

// out[i] ~ U(0, 1] (cuRAND's curand_uniform / curand_uniform2_double).
void fill_uniform(float* out, int64_t n, const Reservation& r, ParallelFor parallel = nullptr);
void fill_uniform(double* out, int64_t n, const Reservation& r, ParallelFor parallel = nullptr);

// out[i] ~ N(0, 1) by Box-Muller, in cuRAND's pairing (see distributions.h).
void fill_normal(float* out, int64_t n, const Reservation& r, ParallelFor parallel = nullptr);
void fill_normal(double* out, int64_t n, const Reservation& r, ParallelFor parallel = nullptr);

// out[i] = 1 with probability p, else 0; p in [0, 1].
void fill_bernoulli(float* out, int64_t n, double p, const Reservation& r,
                    ParallelFor parallel = nullptr);
void fill_bernoulli(double* out, int64_t n, double p, const Reservation& r,
                    ParallelFor parallel = nullptr);

// Inverted dropout: y[i] = x[i] / (1 - p) where element i is kept (a Bernoulli
// draw with probability 1 - p from word i), else exactly 0 (a dropped NaN
// does not propagate). p in [0, 1]; x may equal y. With the same reservation
// it is also the backward: dx = dropout(dy).
void dropout(const float* x, float* y, int64_t n, double p, const Reservation& r,
             ParallelFor parallel = nullptr);
void dropout(const double* x, double* y, int64_t n, double p, const Reservation& r,
             ParallelFor parallel = nullptr);

}  // namespace reprise::rng
