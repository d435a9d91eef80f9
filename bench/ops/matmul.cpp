// GEMM throughput (counter GFLOP, shown per second: 2 M N K / time) of ops::matmul and ops::linear
// in f32: 1024^3, and every product of one Llama example layer step, with
// tokens = 8 x 256 = 2048, hidden 256, intermediate 688, vocab 256:
//
//   forward   y = x W^T            linear (2048, K) x (N, K)
//   backward  dx = dy W            matmul (2048, N) @ (N, K)
//             dW = dy^T x          matmul (2048, N)^T @ (2048, K), dy^T a view
//
// for (N, K) = (256, 256) (q, k, v, o and lm_head), (688, 256) (gate, up)
// and (256, 688) (down). Each result is checked against f64 dot products
// before timing. bench/ops/matmul_torch.py runs this beside PyTorch.
#include "ops/matmul.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/support.h"

namespace {

using namespace reprise;

enum class Form { matmul, linear, matmul_at };  // a @ b, x @ w^T, a^T @ b

struct Case {
  const char* name;
  int64_t M, N, K;
  Form form;
};

const Case kCases[] = {
    {"mm_1024", 1024, 1024, 1024, Form::matmul},
    {"fwd_qkvo_lm_head", 2048, 256, 256, Form::linear},
    {"fwd_gate_up", 2048, 688, 256, Form::linear},
    {"fwd_down", 2048, 256, 688, Form::linear},
    {"dx_qkvo_lm_head", 2048, 256, 256, Form::matmul},
    {"dx_gate_up", 2048, 256, 688, Form::matmul},
    {"dx_down", 2048, 688, 256, Form::matmul},
    {"dw_qkvo_lm_head", 256, 256, 2048, Form::matmul_at},
    {"dw_gate_up", 688, 256, 2048, Form::matmul_at},
    {"dw_down", 256, 688, 2048, Form::matmul_at},
};

// The operands as stored (x and w for linear, a^T's buffer for matmul_at),
// and the product.
struct Operands {
  Tensor a, b;
  Form form;
  Tensor run() const {
    return form == Form::linear      ? ops::linear(a, b)
           : form == Form::matmul_at ? ops::matmul(a.transpose(0, 1), b)
                                     : ops::matmul(a, b);
  }
};

Operands make(const Case& c) {
  if (c.form == Form::linear)
    return {bench::lcg_tensor({c.M, c.K}, 1), bench::lcg_tensor({c.N, c.K}, 2), c.form};
  if (c.form == Form::matmul_at)
    return {bench::lcg_tensor({c.K, c.M}, 1), bench::lcg_tensor({c.K, c.N}, 2), c.form};
  return {bench::lcg_tensor({c.M, c.K}, 1), bench::lcg_tensor({c.K, c.N}, 2), c.form};
}

// Checks 64 elements of c against f64 dot products of the logical
// (M, K) and (K, N) operands: |error| <= 1e-5 * sum_k |a_ik b_kj|.
void check(const Case& cs, const Operands& op, const Tensor& c) {
  Tensor la = op.form == Form::matmul_at ? op.a.transpose(0, 1) : op.a;
  Tensor lb = op.form == Form::linear ? op.b.transpose(0, 1) : op.b;
  std::vector<float> av = la.to_vector<float>(), bv = lb.to_vector<float>(),
                     cv = c.to_vector<float>();
  for (int64_t p = 0; p < 64; ++p) {
    const int64_t i = (p * 7919) % cs.M, j = (p * 104729 + 17) % cs.N;
    double dot = 0, mag = 0;
    for (int64_t k = 0; k < cs.K; ++k) {
      const double t = double(av[size_t(i * cs.K + k)]) * bv[size_t(k * cs.N + j)];
      dot += t;
      mag += std::abs(t);
    }
    const double got = cv[size_t(i * cs.N + j)];
    if (!(std::abs(got - dot) <= 1e-5 * mag)) {
      std::fprintf(stderr, "matmul bench %s: wrong element (%ld, %ld): %g vs %g\n", cs.name,
                   long(i), long(j), got, dot);
      std::abort();
    }
  }
}

void run_case(benchmark::State& state, const Case& c) {
  const Operands op = make(c);
  check(c, op, op.run());
  for (auto _ : state) {
    Tensor out = op.run();
    benchmark::DoNotOptimize(out.raw_data());
  }
  state.counters["GFLOP"] = benchmark::Counter(2e-9 * double(c.M) * double(c.N) * double(c.K),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K));
}

}  // namespace

int main(int argc, char** argv) {
  for (const Case& c : kCases) {
    benchmark::RegisterBenchmark(c.name, run_case, c)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
