#pragma once
// How the CUDA backend writes its kernels, so that every kernel also runs on
// the CPU over a simulated grid (cuda/sim.h): that is how they are tested on
// machines without a GPU, against the CPU backend, bit for bit.
//
// A kernel is a functor of trivially copyable parameters (raw pointers,
// sizes, strides) with
//
//   static constexpr int kThreads = 256;            // threads per block
//   template <class Ctx> REPRISE_HD void operator()(Ctx& ctx) const;
//
// launched over a 1-D grid of blocks: on the GPU by cuda/launch.cuh (Ctx =
// DeviceCtx, one CUDA thread per thread), on the CPU by cuda/sim.h (Ctx =
// SimCtx, one block at a time). The body is written for the whole block:
//
//   ctx.block(), ctx.blocks()          this block's index, the grid's size
//   ctx.threads([&](int t) { ... })    a phase: each thread t of the block
//                                      runs the lambda once
//   ctx.sync()                         a barrier between phases
//   auto v = local<T>(ctx); v[t]       a value per thread that lives across
//                                      phases (a register on the GPU)
//   ctx.shfl_down(v, d, w), ctx.shfl_idx(v, lane, w)
//                                      warp shuffles within segments of w
//                                      threads, as block-wide collectives
//   ctx.shared()                       the block's dynamic shared memory
//
// Code outside a phase must be the same for every thread of a block (block
// indices, loop bounds over tiles): the GPU runs it in every thread, the
// simulator once per block. Whatever a thread keeps for itself lives in a
// Local; a plain variable written inside a phase would be one variable for
// the whole simulated block. Collectives (sync, shuffles) are called
// outside phases, by every thread, as CUDA requires of __syncthreads and of
// full-warp shuffles.
//
// The simulator runs each phase's threads in order, or in reverse order
// when asked: a kernel whose threads race (one reads in a phase what another
// writes in it) gives different results in the two orders, which the tests
// check (tests/cuda).

#include <cstddef>
#include <cstdint>

#include "base/hd.h"

namespace reprise::cuda {

// A value per thread of the block (Ctx::Local<T>); v[t] is thread t's.
template <class T, class Ctx>
REPRISE_HD auto local(const Ctx&) {
  return typename Ctx::template Local<T>{};
}

// Carves a block's dynamic shared memory into arrays. With base 0 it only
// counts, so the host computes the launch's shared bytes with the same code
// the kernel uses to lay them out. Arrays are 16-byte aligned.
class SharedLayout {
 public:
  REPRISE_HD explicit SharedLayout(uintptr_t base) : base_(base) {}
  template <class T>
  REPRISE_HD T* take(int64_t count) {
    used_ = (used_ + 15) / 16 * 16;
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += size_t(count) * sizeof(T);
    return p;
  }
  REPRISE_HD size_t bytes() const { return (used_ + 15) / 16 * 16; }

 private:
  uintptr_t base_;
  size_t used_ = 0;
};

// Blocks for `units` independent units of work of kThreads-sized blocks: at
// most kMaxBlocks, the rest taken by grid-stride loops.
inline constexpr int64_t kMaxBlocks = int64_t(1) << 16;
inline int64_t blocks_for(int64_t units, int64_t per_block) {
  const int64_t b = (units + per_block - 1) / per_block;
  return b < kMaxBlocks ? b : kMaxBlocks;
}

// ---- the CPU's 16-lane row reductions (cpu/rows.h, cpu/vec.h) --------------
// A row is reduced by a segment of 16 consecutive threads: lane l (t % 16)
// accumulates the terms i with i % 16 == l in order of i, then the lanes fold
// in cpu/vec.h's order, pairs (l, l + 8), (l, l + 4), (l, l + 2), (l, l + 1).
// That is the CPU's order of roundings, so a row gives the CPU's bits.
inline constexpr int kLanes = 16;

// Folds the 16 lanes of each segment into its lane 0 by `op` (the others
// keep partial values).
template <class Ctx, class L, class Op>
REPRISE_HD void fold16(Ctx& ctx, L& v, Op op) {
  for (int half = 8; half > 0; half /= 2) {
    const L other = ctx.shfl_down(v, half, kLanes);
    ctx.threads([&](int t) { v[t] = op(v[t], other[t]); });
  }
}

// The 16-lane sum, broadcast to every lane of the segment.
template <class Ctx, class L>
REPRISE_HD void fold16_sum(Ctx& ctx, L& v) {
  fold16(ctx, v, [](auto a, auto b) { return a + b; });
  v = ctx.shfl_idx(v, 0, kLanes);
}

// The 16-lane maximum as cpu/vec.h's fold_max takes it (a > b ? a : b),
// broadcast to every lane of the segment.
template <class Ctx, class L>
REPRISE_HD void fold16_max(Ctx& ctx, L& v) {
  fold16(ctx, v, [](auto a, auto b) { return a > b ? a : b; });
  v = ctx.shfl_idx(v, 0, kLanes);
}

}  // namespace reprise::cuda
