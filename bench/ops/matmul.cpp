// GEMM throughput (counter GFLOP, shown per second: 2 M N K / time) of ops::matmul and ops::linear
// in f32, and as bf16/<case> in bf16 (cpu/gemm_bf16.cpp): 1024^3, every
// product of one Llama example layer step, with tokens = 8 x 256 = 2048,
// hidden 256, intermediate 688, vocab 256:
//
//   forward   y = x W^T            linear (2048, K) x (N, K)
//   backward  dx = dy W            matmul (2048, N) @ (N, K)
//             dW = dy^T x          matmul (2048, N)^T @ (2048, K), dy^T a view
//
// for (N, K) = (256, 256) (q, k, v, o and lm_head), (688, 256) (gate, up)
// and (256, 688) (down), and the forward products of the SmolLM2-135M
// shape (tokens 4 x 256 = 1024, hidden 576, kv 192, intermediate 1536,
// vocabulary 49152) with the tied head's two backward products. Each result is checked against f64
// dot products before timing. bench/ops/matmul_torch.py runs this beside PyTorch.
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
    {"smol_q_o", 1024, 576, 576, Form::linear},
    {"smol_k_v", 1024, 192, 576, Form::linear},
    {"smol_gate_up", 1024, 1536, 576, Form::linear},
    {"smol_down", 1024, 576, 1536, Form::linear},
    {"smol_head", 1024, 49152, 576, Form::linear},
    {"smol_dx_head", 1024, 576, 49152, Form::matmul},
    {"smol_dw_head", 49152, 576, 1024, Form::matmul_at},
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

Operands make(const Case& c, DType dtype) {
  const Shape sa = c.form == Form::matmul_at ? Shape{c.K, c.M} : Shape{c.M, c.K};
  const Shape sb = c.form == Form::linear ? Shape{c.N, c.K} : Shape{c.K, c.N};
  return {bench::lcg_tensor(sa, 1).to(dtype), bench::lcg_tensor(sb, 2).to(dtype), c.form};
}

// Checks 64 elements of c against f64 dot products of the logical
// (M, K) and (K, N) operands: |error| <= 1e-5 * sum_k |a_ik b_kj|, plus
// the one rounding of a bf16 result (2^-8 relative).
void check(const Case& cs, const Operands& op, const Tensor& c) {
  Tensor la = op.form == Form::matmul_at ? op.a.transpose(0, 1) : op.a;
  Tensor lb = op.form == Form::linear ? op.b.transpose(0, 1) : op.b;
  std::vector<float> av = la.to(DType::f32).to_vector<float>(),
                     bv = lb.to(DType::f32).to_vector<float>(),
                     cv = c.to(DType::f32).to_vector<float>();
  for (int64_t p = 0; p < 64; ++p) {
    const int64_t i = (p * 7919) % cs.M, j = (p * 104729 + 17) % cs.N;
    double dot = 0, mag = 0;
    for (int64_t k = 0; k < cs.K; ++k) {
      const double t = double(av[size_t(i * cs.K + k)]) * bv[size_t(k * cs.N + j)];
      dot += t;
      mag += std::abs(t);
    }
    const double got = cv[size_t(i * cs.N + j)];
    const double rounding = c.dtype() == DType::bf16 ? std::ldexp(std::abs(dot), -8) : 0.0;
    if (!(std::abs(got - dot) <= 1e-5 * mag + rounding)) {
      std::fprintf(stderr, "matmul bench %s: wrong element (%ld, %ld): %g vs %g\n", cs.name,
                   long(i), long(j), got, dot);
      std::abort();
    }
  }
}

void run_case(benchmark::State& state, const Case& c, DType dtype) {
  const Operands op = make(c, dtype);
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
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const Case& c : kCases) {
      const std::string name = dtype == DType::bf16 ? std::string("bf16/") + c.name : c.name;
      benchmark::RegisterBenchmark(name.c_str(), run_case, c, dtype)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
