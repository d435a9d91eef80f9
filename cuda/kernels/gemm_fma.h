#pragma once
// A GemmProblem (cuda/gemm_problem.h) as FMA chains: one thread per element
// of C, which reduces k from 0 up with one fused multiply-add per term in
// the accumulation type (f32, or f64 for f64), as the CPU backend does. An
// element's bits depend on its own row and column only, never on the
// problem's other sizes: a decode (one row) and a training forward (B T
// rows) agree, a sequence's rows agree alone and in any batch, and the
// CPU's bits come out. The simulator runs every product with it; on a
// device it replaces cuBLASLt in the batch-invariant mode
// (engine/cuda_matmul.h), at the cost of cuBLAS's tiling.

#include <cmath>
#include <type_traits>

#include "cuda/gemm_problem.h"
#include "cuda/kernel.h"
#include "cuda/kernels/strided.h"
#include "engine/dtype.h"

namespace reprise::cuda {

template <class T>
struct FmaChainGemm {
  static constexpr int kThreads = 256;
  GemmProblem p;

  template <class Ctx>
  REPRISE_HD void operator()(Ctx& ctx) const {
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* a = static_cast<const T*>(p.a);
    const T* b = static_cast<const T*>(p.b);
    T* c = static_cast<T*>(p.c);
    const int64_t per_matrix = p.m * p.n;
    ctx.threads([&](int t) {
      grid_stride<kThreads>(ctx, t, p.batch * per_matrix, [&](int64_t e) {
        const int64_t i = e / per_matrix, col = e % per_matrix / p.m, row = e % p.m;
        const T* ai = a + i * p.stride_a;
        const T* bi = b + i * p.stride_b;
        Acc acc = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const T x = p.trans_a ? ai[q + row * p.lda] : ai[row + q * p.lda];
          const T y = p.trans_b ? bi[col + q * p.ldb] : bi[q + col * p.ldb];
          acc = std::fma(convert<Acc>(x), convert<Acc>(y), acc);
        }
        c[i * p.stride_c + row + col * p.ldc] = convert<T>(acc);
      });
    });
  }
};

// Runs p as FMA chains on `ex`'s device.
template <class Exec>
void fma_chain_gemm(const Exec& ex, const GemmProblem& p) {
  const int64_t elements = p.batch * p.m * p.n;
  if (elements == 0) return;
  dispatch_any_float(p.dtype, "matmul on CUDA", [&]<class T>() {
    ex.launch(FmaChainGemm<T>{p}, blocks_for(elements, FmaChainGemm<T>::kThreads));
  });
}

}  // namespace reprise::cuda
