// Forward + backward of one MoE layer (nn::SparseMoeBlock) at the MoE
// example's shapes (examples/moe_train with no flags): N = 16 x 128 = 2048
// tokens, C = 128, 8 SwiGLU experts of F = 176, top-2 softmax routing, f32.
// Counter GFLOP (shown per second): the matmul flops of the step, 3x the
// forward's 2 N C E (router) + 3 x 2 (N k) C F (experts).
//
// Argument: 0 Mixtral's layer (no capacity limit), 1 with capacity_factor
// 1.0 (assignments over N k / E per expert dropped), 2 with one shared
// expert.
//
// Before timing, the forward is checked against a plain double-precision
// loop (routing, gates and experts) on a sample of tokens.
//
// The step runs many short parallel regions (each op, each expert's GEMM);
// on a machine whose cores are busy with other work, threads that spin
// while they wait dominate (measured 2026-12-02, when the ops ran on
// OpenMP, load 6 on 2 cores: 1.37 s per step with its default wait policy,
// 56 ms with OMP_WAIT_POLICY=passive, 58 ms at REPRISE_NUM_THREADS=1). The
// ops now run on reprise's pool, whose workers spin at most REPRISE_SPIN_US
// between jobs: run it on idle cores or with REPRISE_SPIN_US=0.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "autograd/backward.h"
#include "engine/grad_mode.h"
#include "nn/moe.h"
#include "ops/binary.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "rng/generator.h"

namespace {

using namespace reprise;

constexpr int64_t kN = 16 * 128, kC = 128, kF = 176, kE = 8, kK = 2;

nn::MoeConfig config_of(int64_t arg) {
  nn::MoeConfig c{.num_local_experts = kE, .num_experts_per_tok = kK};
  if (arg == 1) c.capacity_factor = 1.0;
  if (arg == 2) c.n_shared_experts = 1;
  return c;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (float f : t.to_vector<float>()) out.push_back(double(f));
  return out;
}

// Token n's output by the formulas, in double (no capacity limit, no shared expert).
std::vector<double> reference(const nn::SparseMoeBlock& b, const std::vector<double>& x,
                              int64_t n) {
  const std::vector<double> g = values(b.gate.weight());  // (E, C)
  const double* xn = x.data() + n * kC;
  std::vector<double> p(kE);
  for (int64_t e = 0; e < kE; ++e) {
    double s = 0;
    for (int64_t c = 0; c < kC; ++c) s += g[size_t(e * kC + c)] * xn[c];
    p[size_t(e)] = s;
  }
  const double mx = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - mx));
  std::vector<int64_t> order(kE);
  for (int64_t e = 0; e < kE; ++e) order[size_t(e)] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
  const double top = p[size_t(order[0])] + p[size_t(order[1])];
  std::vector<double> out(kC, 0.0);
  for (int64_t j = 0; j < kK; ++j) {
    const int64_t e = order[size_t(j)];
    const nn::MoeExpert& ex = b.experts[size_t(e)];
    const std::vector<double> w1 = values(ex.gate_proj.weight()),
                              w2 = values(ex.down_proj.weight()), w3 = values(ex.up_proj.weight());
    std::vector<double> a(kF);
    for (int64_t f = 0; f < kF; ++f) {
      double h1 = 0, h3 = 0;
      for (int64_t c = 0; c < kC; ++c) {
        h1 += w1[size_t(f * kC + c)] * xn[c];
        h3 += w3[size_t(f * kC + c)] * xn[c];
      }
      a[size_t(f)] = h1 / (1 + std::exp(-h1)) * h3;
    }
    for (int64_t c = 0; c < kC; ++c) {
      double y = 0;
      for (int64_t f = 0; f < kF; ++f) y += w2[size_t(c * kF + f)] * a[size_t(f)];
      out[size_t(c)] += p[size_t(e)] / top * y;
    }
  }
  return out;
}

void check(const nn::SparseMoeBlock& b, const Tensor& x, const Tensor& out) {
  const std::vector<double> xv = values(x), ov = values(out);
  for (int64_t n = 0; n < kN; n += 97) {
    const std::vector<double> r = reference(b, xv, n);
    for (int64_t c = 0; c < kC; ++c) {
      const double got = ov[size_t(n * kC + c)];
      if (!(std::abs(got - r[size_t(c)]) <= 1e-4 * (1e-2 + std::abs(r[size_t(c)])))) {
        std::fprintf(stderr, "moe_layer bench: token %ld channel %ld: %g vs %g\n", long(n), long(c),
                     got, r[size_t(c)]);
        std::abort();
      }
    }
  }
}

void BM_moe_layer(benchmark::State& state) {
  const nn::MoeConfig config = config_of(state.range(0));
  nn::SparseMoeBlock block("block_sparse_moe", kC, kF, config);
  rng::Generator gen(1);
  for (const nn::NamedParameter& p : block.parameters()) {
    Tensor w = p.value;
    ops::normal_(w, 0.0, 0.1, gen, "init");
  }
  Tensor x = Tensor::empty({kN, kC});
  ops::normal_(x, 0.0, 1.0, gen, "data");
  x.requires_grad(true);
  if (state.range(0) == 0) {
    NoGradGuard no_grad;
    check(block, x, block.forward(x).out);
  }
  int64_t dropped = 0;
  for (auto _ : state) {
    nn::MoeResult r = block.forward(x);
    dropped = r.stats().tokens_dropped;
    Tensor y = r.out;
    autograd::backward(ops::sum(ops::mul(y, y)));
    benchmark::DoNotOptimize(x.grad().raw_data());
    block.zero_grad();
    x.set_grad(Tensor());
  }
  const double shared = double(config.n_shared_experts) * 3 * 2 * kN * kC * kF;
  const double forward = 2.0 * kN * kC * kE + 3 * 2.0 * kN * kK * kC * kF + shared;
  state.counters["GFLOP"] =
      benchmark::Counter(3e-9 * forward, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["dropped"] = double(dropped);
}

BENCHMARK(BM_moe_layer)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
