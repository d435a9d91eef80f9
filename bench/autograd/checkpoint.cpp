// Training-step time and peak saved-activation bytes of a transformer stack
// under each checkpoint policy, and the per-region cost of the RNG replay
// modes. bench/autograd/compare_checkpoint.py runs this beside the same
// model under torch.utils.checkpoint and reports ratios.
//
// B = batch, T = sequence, C = channels, H = query heads, G = kv heads,
// D = head dim, F = MLP width: the Llama example's shapes.
#include "autograd/checkpoint.h"

#include <benchmark/benchmark.h>

#include <cstdio>

#include "autograd/backward.h"
#include "autograd/planner.h"
#include "engine/memory_stats.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"

namespace {

using namespace reprise;
using namespace reprise::autograd;

constexpr int64_t B = 8, T = 256, C = 256, H = 8, G = 4, D = C / H, F = 688;
constexpr int kBlocks = 4;
constexpr double kDropout = 0.1;

Tensor weight(Shape shape, rng::Generator& gen) {
  Tensor w = Tensor::empty(shape);
  ops::normal_(w, 0.0, 0.02, gen);
  w.requires_grad(true);
  w.storage()->set_kind(MemoryKind::parameter);
  return w;
}

struct Block {
  Tensor norm1, wq, wk, wv, wo, norm2, wg, wu, wd;
  explicit Block(rng::Generator& gen)
      : norm1(Tensor::ones({C}).requires_grad(true)),
        wq(weight({C, C}, gen)),
        wk(weight({G * D, C}, gen)),
        wv(weight({G * D, C}, gen)),
        wo(weight({C, C}, gen)),
        norm2(Tensor::ones({C}).requires_grad(true)),
        wg(weight({F, C}, gen)),
        wu(weight({F, C}, gen)),
        wd(weight({C, F}, gen)) {}

  // x: (B, T, C) -> (B, T, C), with residual dropout after attention and MLP.
  Tensor forward(const Tensor& x, rng::Generator& gen) const {
    Tensor h = ops::rmsnorm(x, norm1);
    auto heads = [&](const Tensor& w, int64_t n) {  // (B, T, n D) -> (B, n, T, D)
      return ops::transpose(ops::reshape(ops::linear(h, w), {B, T, n, D}), 1, 2);
    };
    Tensor a = ops::scaled_dot_product_attention(heads(wq, H), heads(wk, G), heads(wv, G),
                                                 {.causal = true});
    a = ops::reshape(ops::transpose(a, 1, 2), {B, T, C});
    Tensor r = ops::add(x, ops::dropout(ops::linear(a, wo), kDropout, gen));
    Tensor h2 = ops::rmsnorm(r, norm2);
    Tensor m = ops::linear(ops::mul(ops::silu(ops::linear(h2, wg)), ops::linear(h2, wu)), wd);
    return ops::add(r, ops::dropout(m, kDropout, gen));
  }
};

struct Stack {
  rng::Generator gen{42};
  std::vector<Block> blocks;
  Tensor x;
  Stack() {
    for (int i = 0; i < kBlocks; ++i) blocks.emplace_back(gen);
    x = Tensor::empty({B, T, C});
    ops::normal_(x, 0.0, 1.0, gen);
  }

  // One forward + backward; returns the peak saved-activation bytes.
  int64_t step(const Policy* policy, const CheckpointOptions& options) {
    memory_stats::reset_peaks();
    int64_t base = memory_stats::snapshot()[MemoryKind::saved_activation].live;
    Tensor h = x;
    for (int i = 0; i < kBlocks; ++i) {
      auto f = [&, i, in = h] { return blocks[size_t(i)].forward(in, gen); };
      h = policy ? checkpoint("layers." + std::to_string(i), *policy, f, options) : f();
    }
    int64_t peak = memory_stats::snapshot()[MemoryKind::saved_activation].peak - base;
    backward(ops::mean(ops::mul(h, h)));
    for (auto& b : blocks) {
      for (Tensor* p : {&b.norm1, &b.wq, &b.wk, &b.wv, &b.wo, &b.norm2, &b.wg, &b.wu, &b.wd}) {
        p->set_grad(Tensor());
      }
    }
    return peak;
  }
};

Stack& stack() {
  static Stack s;
  return s;
}

void run_step(benchmark::State& state, const Policy* policy, CheckpointOptions options = {}) {
  Stack& s = stack();
  int64_t peak = s.step(policy, options);  // warm-up (and the planner's recording step)
  for (auto _ : state) peak = s.step(policy, options);
  state.counters["peak_saved_MiB"] = double(peak) / (1 << 20);
  state.counters["tokens_per_s"] = benchmark::Counter(double(B * T), benchmark::Counter::kIsRate);
}

void BM_Step_none(benchmark::State& state) { run_step(state, nullptr); }
void BM_Step_full(benchmark::State& state) {
  Policy p = policies::full();
  run_step(state, &p);
}
void BM_Step_full_stash(benchmark::State& state) {
  Policy p = policies::full();
  run_step(state, &p, {.rng = RngReplay::stash, .generator = &stack().gen});
}
void BM_Step_op_sac(benchmark::State& state) {
  Policy p = policies::op_sac({"linear", "sdpa"});
  run_step(state, &p);
}
void BM_Step_budget30(benchmark::State& state) {
  Stack& s = stack();
  int64_t none_peak = s.step(nullptr, {});
  BudgetPlanner planner(int64_t(0.3 * double(none_peak)));
  Policy p = planner.policy();
  s.step(&p, {});  // record
  planner.plan();
  run_step(state, &p);
  state.counters["budget_MiB"] = double(planner.summary().budget) / (1 << 20);
}
BENCHMARK(BM_Step_none)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step_full)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step_full_stash)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step_op_sac)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Step_budget30)->Unit(benchmark::kMillisecond);

// Per-region overhead of the RNG replay modes: a region around one small
// dropout (forward only), minus the same op outside any region.
void region_overhead(benchmark::State& state, const CheckpointOptions* options) {
  rng::Generator gen(7);
  Tensor x = Tensor::ones({64}).requires_grad(true);
  Policy p = policies::full();
  RecomputeStats before = recompute_stats();
  for (auto _ : state) {
    Tensor y = options ? checkpoint(
                             "r", p, [&] { return ops::dropout(x, 0.5, gen); }, *options)
                       : ops::dropout(x, 0.5, gen);
    benchmark::DoNotOptimize(y);
  }
  int64_t regions = recompute_stats().regions - before.regions;
  if (regions > 0) {
    state.counters["stashed_bytes_per_region"] =
        double(recompute_stats().rng_bytes_stashed - before.rng_bytes_stashed) / double(regions);
  }
}
void BM_Region_op_only(benchmark::State& state) { region_overhead(state, nullptr); }
void BM_Region_recorded(benchmark::State& state) {
  CheckpointOptions o;
  region_overhead(state, &o);
}
void BM_Region_stash(benchmark::State& state) {
  rng::Generator gen(7);
  CheckpointOptions o{.rng = RngReplay::stash, .generator = &gen};
  region_overhead(state, &o);
}
BENCHMARK(BM_Region_op_only)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Region_recorded)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Region_stash)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
