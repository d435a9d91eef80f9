// The C++ side of one small op call, for bench/python/overhead.py: what
// the Python binding adds is that script's time per call minus this one.
// `a + b` on 16 f32 elements, without and with recording on the tape.

#include <benchmark/benchmark.h>

#include <cstdlib>

#include "engine/grad_mode.h"
#include "ops/binary.h"

using namespace reprise;

namespace {

constexpr int64_t kElements = 16;

void BM_add_small(benchmark::State& state) {
  const bool record = state.range(0) != 0;
  Tensor a = Tensor::full({kElements}, 1.5), b = Tensor::full({kElements}, 2.0);
  if (record) a.requires_grad(true);
  if (ops::add(a, b).data<float>()[kElements - 1] != 3.5f) std::abort();
  for (auto _ : state) benchmark::DoNotOptimize(ops::add(a, b));
  state.SetLabel(record ? "recorded" : "no grad");
}

}  // namespace

BENCHMARK(BM_add_small)->Arg(0)->Arg(1)->Unit(benchmark::kNanosecond);
BENCHMARK_MAIN();
