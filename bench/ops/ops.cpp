// Every registered op, forward and forward + backward, f32, at the Llama
// example's sizes: the one case of each op in the op case table
// (tests/cases/op_case.h) that has model-sized inputs. The tests run the
// same cases' functions on small f64 inputs.
//
// The registry drives it: the program refuses to run when a registered op
// has no timed case (`bench_ops --check` only checks, for CTest), and each
// forward benchmark reports the op's own cost model (OpInfo::flops and
// ::bytes) as GFLOP/s and GB/s, so the planner's costs and the measured
// rates sit side by side. Forward runs under no-grad; "fwd_bwd" records the
// op and takes the gradient of its floating outputs with a fixed upstream
// gradient. bench/ops/ops_torch.py runs the same cases beside PyTorch.
//
//   bench_ops --benchmark_filter='silu|rmsnorm'
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "autograd/backward.h"
#include "autograd/op_info.h"
#include "autograd/op_registry.h"
#include "engine/grad_mode.h"
#include "ops/registry.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace {

using namespace reprise;
using testing::Inputs;
using testing::OpCase;
using Tensors = std::vector<Tensor>;

// A timed case: the op it records, its name in the benchmarks
// ("silu/2048x688") and the case.
struct BenchCase {
  const autograd::OpInfo* op;
  std::string name;
  const OpCase* c;
};

std::vector<BenchCase> timed_cases() {
  std::vector<BenchCase> all;
  for (const OpCase& c : testing::op_cases()) {
    if (!c.perf) continue;
    const std::string op = testing::op_of(c);
    all.push_back({autograd::find_op(op), op + "/" + c.perf->shape, &c});
  }
  return all;
}

// The registered ops without a timed case, by name.
std::vector<std::string> uncovered(const std::vector<BenchCase>& all) {
  std::set<const autograd::OpInfo*> covered;
  for (const BenchCase& c : all) covered.insert(c.op);
  std::vector<std::string> missing;
  for (const autograd::OpInfo* op : ops::registry::all()) {
    if (!covered.count(op)) missing.push_back(op->name);
  }
  return missing;
}

void forward(benchmark::State& state, const BenchCase& c) {
  NoGradGuard no_grad;
  const Inputs in = c.c->perf->inputs();
  Tensors out = c.c->fn(in);
  for (auto _ : state) {
    out = c.c->fn(in);
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  const double per_second = double(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(
      autograd::op_flops(*c.op, in, out) * per_second / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(autograd::op_bytes(*c.op, in, out) * per_second / 1e9,
                                              benchmark::Counter::kIsRate);
}

// The inputs with floating ones as leaves that require grad, the others as
// they are.
Tensors leaves(Tensors in) {
  for (Tensor& t : in) {
    if (is_floating(t.dtype())) t = t.requires_grad(true);
  }
  return in;
}

// The outputs gradients flow through (floating, recorded).
Tensors differentiable(Tensors outputs) {
  std::erase_if(outputs, [](const Tensor& y) { return !y.requires_grad(); });
  return outputs;
}

void forward_backward(benchmark::State& state, const BenchCase& c) {
  const Tensors in = leaves(c.c->perf->inputs());
  Tensors wrt, grads;
  for (const Tensor& t : in) {
    if (t.requires_grad()) wrt.push_back(t);
  }
  // Each upstream gradient in its output's dtype (a cast's output is f64).
  for (const Tensor& y : differentiable(c.c->fn(in)))
    grads.push_back(testing::uniform(y.shape(), -1, 1, 58, y.dtype()));
  for (auto _ : state) {
    Tensors dx = autograd::grad(differentiable(c.c->fn(in)), wrt, grads);
    benchmark::DoNotOptimize(dx[0].raw_data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  static const std::vector<BenchCase> all = timed_cases();
  if (std::vector<std::string> missing = uncovered(all); !missing.empty()) {
    std::fprintf(stderr, "bench_ops: registered ops without a timed case:");
    for (const std::string& name : missing) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--check") == 0) {
    std::printf("bench_ops: all %zu registered ops have a timed case (%zu cases)\n",
                ops::registry::all().size(), all.size());
    return 0;
  }
  for (const BenchCase& c : all) {
    benchmark::RegisterBenchmark((c.name + "/fwd").c_str(), forward, c)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((c.name + "/fwd_bwd").c_str(), forward_backward, c)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
