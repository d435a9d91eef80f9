// Fused attention forward + backward at the Llama example's shapes:
// B = 8, Hq = 8, Hkv = 4, D = 32, causal, T = S in {256, 512, 1024}, f32.
// bench/ops/attention_torch.py runs this beside PyTorch and reports ratios.
// BM_attention_window_fwd_bwd: the same at T = 2048 without a window (0)
// and with a sliding window of 256 keys, whose cost grows as T W, not T^2.
//
// GFLOP/s follows FlashAttention's count: forward 4 B Hq T S D (halved when
// causal; with a window 4 B Hq D times the visible (query, key) pairs),
// backward 2.5 times the forward. peak_MiB is MemoryStats' peak
// over forward + backward, inputs excluded; rss_MiB the rise of the process's
// peak resident set over the same (Linux; measured the same way as torch's in
// attention_torch.py).
#include "ops/attention.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "autograd/backward.h"
#include "bench/support.h"
#include "engine/memory_stats.h"

namespace {

using namespace reprise;

constexpr int64_t kB = 8, kHq = 8, kHkv = 4, kD = 32;

// Checks a few output rows against a direct f64 evaluation before timing
// (causal, keys j > i - window when window > 0).
void check_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                int64_t window) {
  const int64_t T = q.size(2);
  std::vector<float> qv = q.to_vector<float>(), kv = k.to_vector<float>(),
                     vv = v.to_vector<float>(), ov = out.to_vector<float>();
  for (int64_t probe = 0; probe < 4; ++probe) {
    const int64_t b = probe * 3 % kB, h = probe * 5 % kHq, g = h / (kHq / kHkv);
    const int64_t i = (probe * 977 + 13) % T;
    const int64_t j0 = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
    std::vector<double> p(size_t(i + 1), 0.0);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = j0; j <= i; ++j) {
      double s = 0;
      for (int64_t c = 0; c < kD; ++c)
        s += double(qv[size_t(((b * kHq + h) * T + i) * kD + c)]) *
             kv[size_t(((b * kHkv + g) * T + j) * kD + c)];
      p[size_t(j)] = s / std::sqrt(double(kD));
      mx = std::max(mx, p[size_t(j)]);
    }
    for (int64_t j = j0; j <= i; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
    for (int64_t c = 0; c < kD; ++c) {
      double o = 0;
      for (int64_t j = j0; j <= i; ++j)
        o += p[size_t(j)] * vv[size_t(((b * kHkv + g) * T + j) * kD + c)];
      const double got = ov[size_t(((b * kHq + h) * T + i) * kD + c)];
      if (std::abs(got - o / sum) > 1e-5) {
        std::fprintf(stderr, "attention bench: wrong output at (%ld, %ld, %ld, %ld): %g vs %g\n",
                     long(b), long(h), long(i), long(c), got, o / sum);
        std::abort();
      }
    }
  }
}

// Forward + backward of causal attention over T = S positions, with a
// sliding window of `window` keys when > 0.
void run_attention(benchmark::State& state, int64_t T, int64_t window) {
  Tensor q = bench::lcg_tensor({kB, kHq, T, kD}, 1).requires_grad(true);
  Tensor k = bench::lcg_tensor({kB, kHkv, T, kD}, 2).requires_grad(true);
  Tensor v = bench::lcg_tensor({kB, kHkv, T, kD}, 3).requires_grad(true);
  Tensor dout = bench::lcg_tensor({kB, kHq, T, kD}, 4);
  const ops::AttentionOptions opt{.causal = true, .window = window};
  {
    NoGradGuard no_grad;
    check_rows(q, k, v, ops::scaled_dot_product_attention(q, k, v, opt), window);
  }
  memory_stats::reset_peaks();
  const int64_t live = memory_stats::snapshot().total.live;
  const bool rss = bench::reset_peak_rss();
  const double rss_base = bench::proc_status_mib("VmRSS");
  for (auto _ : state) {
    Tensor out = ops::scaled_dot_product_attention(q, k, v, opt);
    autograd::Tensors grads = autograd::grad({out}, {q, k, v}, {dout});
    benchmark::DoNotOptimize(grads[0].raw_data());
  }
  // Visible pairs: T^2 / 2 causal; with W < T, W (W + 1) / 2 in the first W
  // rows and W in each later one.
  const double W = double(window), pairs = window > 0 && window < T
                                               ? W * (W + 1) / 2 + W * double(T - window)
                                               : double(T) * double(T) / 2.0;
  const double fwd_flops = 4.0 * kB * kHq * pairs * kD;
  state.counters["GFLOP/s"] = benchmark::Counter(3.5 * fwd_flops * double(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["peak_MiB"] =
      double(memory_stats::snapshot().total.peak - live) / (1024.0 * 1024.0);
  if (rss) state.counters["rss_MiB"] = bench::proc_status_mib("VmHWM") - rss_base;
}

void BM_attention_fwd_bwd(benchmark::State& state) { run_attention(state, state.range(0), 0); }

void BM_attention_window_fwd_bwd(benchmark::State& state) {
  run_attention(state, state.range(0), state.range(1));
}

BENCHMARK(BM_attention_fwd_bwd)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_attention_window_fwd_bwd)
    ->Args({2048, 0})
    ->Args({2048, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
