// rmsnorm forward and forward + backward, f32, N rows x C channels:
// the Llama example's (2048 tokens, hidden 256), and (8192, 2048) whose
// 64 MiB rows do not fit in cache. bench/ops/nn_ops_torch.py runs this
// beside PyTorch and reports ratios; bench_elementwise's BM_copy is the
// memory-bandwidth reference.
//
// GB/s counts the bytes a fused kernel must move, once each:
//   forward:            read x, write y              = 2 N C 4 bytes
//   forward + backward: forward, then read x, g,
//                       write dx                     = 5 N C 4 bytes
// (w, dw and the per-row rstd are O(C + N) and left out).
#include "ops/norm.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "autograd/backward.h"
#include "bench/support.h"

namespace {

using namespace reprise;

// Checks a few rows of y against a direct f64 evaluation before timing.
void check_rows(const Tensor& x, const Tensor& w, const Tensor& y, double eps) {
  const int64_t N = x.size(0), C = x.size(1);
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  const float* py = y.data<float>();
  for (int64_t n : {int64_t(0), N / 3, N - 1}) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += double(px[n * C + c]) * px[n * C + c];
    const double r = 1.0 / std::sqrt(ms / double(C) + eps);
    for (int64_t c = 0; c < C; ++c) {
      const double want = double(pw[c]) * px[n * C + c] * r;
      if (std::abs(py[n * C + c] - want) > 1e-5 * (1 + std::abs(want))) {
        std::fprintf(stderr, "rmsnorm bench: wrong y at (%ld, %ld): %g vs %g\n", long(n), long(c),
                     double(py[n * C + c]), want);
        std::abort();
      }
    }
  }
}

void BM_rmsnorm_fwd(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  Tensor x = bench::lcg_tensor({N, C}, 1, -2, 2), w = bench::lcg_tensor({C}, 2, 0.5, 1.5);
  NoGradGuard no_grad;
  check_rows(x, w, ops::rmsnorm(x, w, 1e-6), 1e-6);
  for (auto _ : state) {
    Tensor y = ops::rmsnorm(x, w, 1e-6);
    benchmark::DoNotOptimize(y.raw_data());
  }
  bench::set_bandwidth(state, 2.0 * double(N * C) * 4);
}

void BM_rmsnorm_fwd_bwd(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  Tensor x = bench::lcg_tensor({N, C}, 1, -2, 2).requires_grad(true);
  Tensor w = bench::lcg_tensor({C}, 2, 0.5, 1.5).requires_grad(true);
  Tensor g = bench::lcg_tensor({N, C}, 3, -1, 1);
  {
    NoGradGuard no_grad;
    check_rows(x, w, ops::rmsnorm(x, w, 1e-6), 1e-6);
  }
  for (auto _ : state) {
    Tensor y = ops::rmsnorm(x, w, 1e-6);
    autograd::Tensors grads = autograd::grad({y}, {x, w}, {g});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  bench::set_bandwidth(state, 5.0 * double(N * C) * 4);
}

BENCHMARK(BM_rmsnorm_fwd)
    ->Args({2048, 256})
    ->Args({8192, 2048})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_rmsnorm_fwd_bwd)
    ->Args({2048, 256})
    ->Args({8192, 2048})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
