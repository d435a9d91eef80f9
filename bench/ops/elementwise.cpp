// silu (forward, forward + backward) and add, f32, against a plain
// multithreaded memcpy of the same data: the memory-bandwidth reference
// for this file and for bench_norm. Sizes: n = 2048 x 256 (the Llama
// example's activations, in cache) and 8192 x 2048 (64 MiB, from DRAM).
// bench/ops/nn_ops_torch.py runs this beside PyTorch and reports ratios.
// Two strided cases at the small size: a product with a broadcast column
// (rows x 256 times rows x 1, the row scale of a norm) and silu of a
// transposed view (each run reads every 256th value).
//
// GB/s counts the bytes each op must move, once each:
//   copy: read + write = 2 n 4;  silu: read x, write y = 2 n 4;
//   silu forward + backward: 2 n 4 + read x, g, write dx = 5 n 4;
//   add: read a, b, write out = 3 n 4;
//   the broadcast product and the transposed silu: read, write = 2 n 4.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "autograd/backward.h"
#include "bench/support.h"
#include "engine/threads.h"
#include "ops/binary.h"
#include "ops/unary.h"

namespace {

using namespace reprise;

void check_silu(const Tensor& x, const Tensor& y) {
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 4099) {
    const double want = double(px[i]) / (1.0 + std::exp(-double(px[i])));
    if (std::abs(py[i] - want) > 1e-6 * (1 + std::abs(want))) {
      std::fprintf(stderr, "silu bench: wrong y[%ld]: %g vs %g\n", long(i), double(py[i]), want);
      std::abort();
    }
  }
}

void BM_copy(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor src = bench::lcg_tensor({n}, 1, -4, 4), dst = Tensor::empty({n});
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  for (auto _ : state) {
    threads::parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
      std::memcpy(d + b, s + b, size_t(e - b) * sizeof(float));
    });
    benchmark::DoNotOptimize(d);
    benchmark::ClobberMemory();
  }
  if (std::memcmp(s, d, size_t(n) * sizeof(float)) != 0) std::abort();
  bench::set_bandwidth(state, 2.0 * double(n) * 4);
}

void BM_silu_fwd(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = bench::lcg_tensor({n}, 2, -4, 4);
  NoGradGuard no_grad;
  check_silu(x, ops::silu(x));
  for (auto _ : state) {
    Tensor y = ops::silu(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  bench::set_bandwidth(state, 2.0 * double(n) * 4);
}

void BM_silu_fwd_bwd(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = bench::lcg_tensor({n}, 3, -4, 4).requires_grad(true);
  Tensor g = bench::lcg_tensor({n}, 4, -4, 4);
  {
    NoGradGuard no_grad;
    check_silu(x, ops::silu(x));
  }
  for (auto _ : state) {
    Tensor y = ops::silu(x);
    autograd::Tensors dx = autograd::grad({y}, {x}, {g});
    benchmark::DoNotOptimize(dx[0].raw_data());
  }
  bench::set_bandwidth(state, 5.0 * double(n) * 4);
}

void BM_mul_broadcast_column(benchmark::State& state) {
  const int64_t n = state.range(0), rows = n / 256;
  Tensor a = bench::lcg_tensor({rows, 256}, 7, -4, 4), b = bench::lcg_tensor({rows, 1}, 8, -4, 4);
  NoGradGuard no_grad;
  Tensor check = ops::mul(a, b);
  for (int64_t i = 0; i < n; i += 4099) {
    if (check.data<float>()[i] != a.data<float>()[i] * b.data<float>()[i / 256]) std::abort();
  }
  for (auto _ : state) {
    Tensor y = ops::mul(a, b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  bench::set_bandwidth(state, 2.0 * double(n) * 4);
}

void BM_silu_transposed(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = bench::lcg_tensor({n / 256, 256}, 9, -4, 4);
  NoGradGuard no_grad;
  check_silu(x.transpose(0, 1).contiguous(), ops::silu(x.transpose(0, 1)));
  for (auto _ : state) {
    Tensor y = ops::silu(x.transpose(0, 1));
    benchmark::DoNotOptimize(y.raw_data());
  }
  bench::set_bandwidth(state, 2.0 * double(n) * 4);
}

void BM_add(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = bench::lcg_tensor({n}, 5, -4, 4), b = bench::lcg_tensor({n}, 6, -4, 4);
  NoGradGuard no_grad;
  Tensor check = ops::add(a, b);
  for (int64_t i = 0; i < n; i += 4099) {
    if (check.data<float>()[i] != a.data<float>()[i] + b.data<float>()[i]) std::abort();
  }
  for (auto _ : state) {
    Tensor y = ops::add(a, b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  bench::set_bandwidth(state, 3.0 * double(n) * 4);
}

constexpr int64_t kSmall = 2048 * 256, kLarge = 8192 * 2048;

BENCHMARK(BM_copy)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_silu_fwd)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_silu_fwd_bwd)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_add)->Arg(kSmall)->Arg(kLarge)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mul_broadcast_column)->Arg(kSmall)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_silu_transposed)->Arg(kSmall)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
