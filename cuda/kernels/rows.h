#pragma once
// Rows of a contiguous (M, R) tensor, one per segment of 16 threads, with
// the CPU's 16-lane sums and maxima (cpu/rows.h; cuda/kernel.h says how the
// lanes map to threads): a row's reductions, and so softmax, the norms and
// cross_entropy, come out with the CPU's bits.
//
// A block of 256 threads holds 16 segments; block b takes rows
// 16 (b + i * blocks) + s, i = 0, 1, ... (a block-uniform loop).

#include <cmath>
#include <cstdint>

#include "cuda/kernel.h"
#include "engine/functors.h"

namespace reprise::cuda {

inline constexpr int kRowThreads = 256;
inline constexpr int kRowsPerBlock = kRowThreads / kLanes;

// The blocks for M rows.
inline int64_t row_blocks(int64_t M) { return blocks_for(M, kRowsPerBlock); }

// Calls body(row0) for each group of 16 rows this block takes; the row of
// thread t is row0 + t / 16 (which may be >= M in the last group).
template <class Ctx, class Body>
REPRISE_HD void for_row_groups(const Ctx& ctx, int64_t M, Body&& body) {
  for (int64_t g = ctx.block(); g * kRowsPerBlock < M; g += ctx.blocks()) body(g * kRowsPerBlock);
}

// The CPU's row_sum of term(t, i) over i in [0, R) for each thread's row
// (rows with active(t) false contribute 0), broadcast to the row's lanes.
template <class T, class Ctx, class Active, class Term>
REPRISE_HD auto row_sum(Ctx& ctx, int64_t R, const Active& active, const Term& term) {
  auto acc = local<T>(ctx);
  ctx.threads([&](int t) {
    T a = T(0);
    if (active(t)) {
      const int l = t % kLanes;
      for (int64_t i = 0; i < R; i += kLanes) a = a + (i + l < R ? T(term(t, i + l)) : T(0));
    }
    acc[t] = a;
  });
  fold16_sum(ctx, acc);
  return acc;
}

// The CPU's row_max of x (row of thread t at row(t), R >= 1, values of any
// type read as T), broadcast.
template <class T, class Ctx, class Active, class Row>
REPRISE_HD auto row_max(Ctx& ctx, int64_t R, const Active& active, const Row& row) {
  auto acc = local<T>(ctx);
  ctx.threads([&](int t) {
    T a = T(0);
    if (active(t)) {
      const auto* x = row(t);
      const int l = t % kLanes;
      a = T(x[0]);
      for (int64_t i = l; i < R; i += kLanes) a = fn::vmax(T(x[i]), a);
    }
    acc[t] = a;
  });
  fold16_max(ctx, acc);
  return acc;
}

// Block-wide reduction of one int64 per thread by a commutative,
// associative op (integers: any order gives the same result). Every thread
// gets the result. `scratch`: 32 int64 of shared memory.
template <class Ctx, class L, class Op>
REPRISE_HD void block_reduce(Ctx& ctx, L& v, int64_t* scratch, Op op) {
  for (int d = 16; d > 0; d /= 2) {
    const L other = ctx.shfl_down(v, d, 32);
    ctx.threads([&](int t) { v[t] = op(v[t], other[t]); });
  }
  ctx.threads([&](int t) {
    if (t % 32 == 0) scratch[t / 32] = v[t];
  });
  ctx.sync();
  ctx.threads([&](int t) {
    int64_t r = scratch[0];
    for (int w = 1; w < Ctx::kThreads / 32; ++w) r = op(r, scratch[w]);
    v[t] = r;
  });
  ctx.sync();
}

}  // namespace reprise::cuda
