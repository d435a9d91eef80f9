// Shape, indexing and cast ops on the CPU at shapes a Llama or MoE step
// uses: an embedding lookup and its backward, a router's top-2, a sampler's
// top-50, a per-row gather and its scatter, cat, where, and f32 -> bf16.
// 2 threads (threads::set_num_threads) unless REPRISE_BENCH_THREADS says
// otherwise. Each variant checks its result before timing.
//
// Counter GB/s: bytes the op must read plus bytes it writes, counted as the
// op's minimum (an out-of-place add reads x and src and writes the output;
// a selection reads only the selected rows).
// B = tokens, C = channels, V = vocabulary rows, E = experts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bench/support.h"
#include "engine/threads.h"
#include "ops/cast.h"
#include "ops/indexing.h"
#include "ops/shape.h"

namespace {

using reprise::DType;
using reprise::Tensor;
namespace ops = reprise::ops;

constexpr int64_t kB = 4096, kC = 512, kV = 32000;

void use_threads() {
  const char* env = std::getenv("REPRISE_BENCH_THREADS");
  reprise::threads::set_num_threads(env ? std::atoi(env) : 2);
}

// Deterministic values in [0, 1) and indices in [0, hi).
Tensor values(const reprise::Shape& shape) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  uint64_t s = 88172645463325252ull;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = float(s >> 40) * 0x1p-24f;
  }
  return t;
}

Tensor indices(const reprise::Shape& shape, int64_t hi) {
  Tensor t = Tensor::empty(shape, DType::i64);
  int64_t* p = t.data<int64_t>();
  uint64_t s = 2463534242ull;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = int64_t(s % uint64_t(hi));
  }
  return t;
}

// Embedding lookup: (V, C) table, B token ids -> (B, C).
void BM_IndexSelectRows(benchmark::State& state) {
  use_threads();
  Tensor table = values({kV, kC});
  Tensor ids = indices({kB}, kV);
  Tensor y = ops::index_select(table, 0, ids);
  const int64_t row = ids.data<int64_t>()[17];
  reprise::bench::check(y.data<float>()[17 * kC + 5] == table.data<float>()[row * kC + 5],
                        "index_select");
  for (auto _ : state) benchmark::DoNotOptimize(ops::index_select(table, 0, ids).raw_data());
  reprise::bench::set_bandwidth(state, double(2 * y.nbytes() + ids.nbytes()));
}

// Its backward: B rows of (B, C) added into a (V, C) zero table, repeats
// summed in token order.
void BM_IndexAddRows(benchmark::State& state) {
  use_threads();
  constexpr int64_t kRows = 1024;
  Tensor zeros = Tensor::zeros({kRows, kC});
  Tensor ids = indices({kB}, kRows);
  Tensor src = values({kB, kC});
  Tensor y = ops::index_add(zeros, 0, ids, src);
  double want = 0;
  for (int64_t j = 0; j < kB; ++j)
    if (ids.data<int64_t>()[j] == 3) want += src.data<float>()[j * kC];
  reprise::bench::check(std::abs(y.data<float>()[3 * kC] - want) < 1e-3, "index_add");
  for (auto _ : state) benchmark::DoNotOptimize(ops::index_add(zeros, 0, ids, src).raw_data());
  reprise::bench::set_bandwidth(state, double(2 * zeros.nbytes() + src.nbytes() + ids.nbytes()));
}

// MoE router: (B, E) logits, top-2 experts per token.
void BM_TopkRouter(benchmark::State& state) {
  use_threads();
  Tensor logits = values({8 * kB, 64});
  ops::TopKResult r = ops::topk(logits, 2, -1);
  const float* row = logits.data<float>();
  float best = row[0];
  for (int64_t e = 1; e < 64; ++e) best = std::max(best, row[e]);
  reprise::bench::check(r.values.data<float>()[0] == best, "topk router");
  for (auto _ : state) benchmark::DoNotOptimize(ops::topk(logits, 2, -1).values.raw_data());
  reprise::bench::set_bandwidth(state,
                                double(logits.nbytes() + r.values.nbytes() + r.indices.nbytes()));
}

// Sampler: (64, V) logits, top-50 per row.
void BM_TopkVocab(benchmark::State& state) {
  use_threads();
  Tensor logits = values({64, kV});
  ops::TopKResult r = ops::topk(logits, 50, -1);
  reprise::bench::check(r.values.data<float>()[0] >= r.values.data<float>()[1], "topk vocab");
  for (auto _ : state) benchmark::DoNotOptimize(ops::topk(logits, 50, -1).values.raw_data());
  reprise::bench::set_bandwidth(state,
                                double(logits.nbytes() + r.values.nbytes() + r.indices.nbytes()));
}

// Per-row gather along the last dim: (B, 1024), 8 picks per row.
void BM_GatherLastDim(benchmark::State& state) {
  use_threads();
  Tensor x = values({kB, 1024});
  Tensor idx = indices({kB, 8}, 1024);
  Tensor y = ops::gather(x, 1, idx);
  reprise::bench::check(y.data<float>()[9] == x.data<float>()[1024 + idx.data<int64_t>()[9]],
                        "gather");
  for (auto _ : state) benchmark::DoNotOptimize(ops::gather(x, 1, idx).raw_data());
  reprise::bench::set_bandwidth(state, double(2 * y.nbytes() + idx.nbytes()));
}

// Its backward shape: 8 values per row added into a (B, 1024) zero tensor.
void BM_ScatterAddLastDim(benchmark::State& state) {
  use_threads();
  Tensor zeros = Tensor::zeros({kB, 1024});
  Tensor idx = indices({kB, 8}, 1024);
  Tensor src = values({kB, 8});
  Tensor y = ops::scatter_add(zeros, 1, idx, src);
  double want = 0;
  for (int64_t j = 0; j < 8; ++j)
    if (idx.data<int64_t>()[j] == idx.data<int64_t>()[0]) want += src.data<float>()[j];
  reprise::bench::check(std::abs(y.data<float>()[idx.data<int64_t>()[0]] - want) < 1e-5,
                        "scatter_add");
  for (auto _ : state) benchmark::DoNotOptimize(ops::scatter_add(zeros, 1, idx, src).raw_data());
  reprise::bench::set_bandwidth(state, double(2 * zeros.nbytes() + src.nbytes() + idx.nbytes()));
}

// Three (B, C) activations joined along channels -> (B, 3C).
void BM_CatLastDim(benchmark::State& state) {
  use_threads();
  Tensor a = values({kB, kC}), b = values({kB, kC}), c = values({kB, kC});
  Tensor y = ops::cat({a, b, c}, 1);
  reprise::bench::check(y.data<float>()[3 * kC + kC + 7] == b.data<float>()[kC + 7], "cat");
  for (auto _ : state) benchmark::DoNotOptimize(ops::cat({a, b, c}, 1).raw_data());
  reprise::bench::set_bandwidth(state, double(2 * y.nbytes()));
}

// Masked select of two (B, 1024) tensors, half the mask true at random.
void BM_Where(benchmark::State& state) {
  use_threads();
  Tensor a = values({kB, 1024}), b = values({kB, 1024});
  Tensor u = values({kB, 1024});
  Tensor cond = Tensor::empty({kB, 1024}, DType::boolean);
  for (int64_t i = 0; i < u.numel(); ++i) cond.data<bool>()[i] = u.data<float>()[i] < 0.5f;
  Tensor y = ops::where(cond, a, b);
  reprise::bench::check(y.data<float>()[11] == (cond.data<bool>()[11] ? a : b).data<float>()[11],
                        "where");
  for (auto _ : state) benchmark::DoNotOptimize(ops::where(cond, a, b).raw_data());
  reprise::bench::set_bandwidth(state,
                                double(a.nbytes() + b.nbytes() + cond.nbytes() + y.nbytes()));
}

// f32 -> bf16 over 2^24 elements.
void BM_CastF32ToBf16(benchmark::State& state) {
  use_threads();
  Tensor x = values({int64_t(1) << 24});
  Tensor y = ops::cast(x, DType::bf16);
  reprise::bench::check(
      float(y.data<reprise::bfloat16>()[3]) == float(reprise::bfloat16(x.data<float>()[3])),
      "cast");
  for (auto _ : state) benchmark::DoNotOptimize(ops::cast(x, DType::bf16).raw_data());
  reprise::bench::set_bandwidth(state, double(x.nbytes() + y.nbytes()));
}

BENCHMARK(BM_IndexSelectRows)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_IndexAddRows)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_TopkRouter)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_TopkVocab)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GatherLastDim)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_ScatterAddLastDim)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CatLastDim)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Where)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CastF32ToBf16)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
