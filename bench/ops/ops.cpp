// Every registered op (ops/registry.h), forward and forward + backward, f32,
// at the Llama example's sizes: N = 2048 tokens (batch 8 x sequence 256),
// hidden C = 256, intermediate F = 688, 8 query and 4 key/value heads of
// 32, vocabulary 256, and for the MoE ops 8 experts with top-2 routing.
//
// The registry drives it: the program refuses to run when a registered op
// has no case below (`bench_ops --check` only checks, for CTest), and each
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
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autograd/backward.h"
#include "autograd/op_info.h"
#include "bench/support.h"
#include "engine/grad_mode.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/embedding.h"
#include "ops/grouped_linear.h"
#include "ops/indexing.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/moe_route.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "rng/generator.h"

namespace {

using namespace reprise;
namespace reg = ops::registry;
using Tensors = std::vector<Tensor>;

constexpr int64_t N = 2048, C = 256, F = 688, B = 8, T = 256, Hq = 8, Hkv = 4, D = 32, V = 256;
constexpr int64_t E = 8, K = 2;

struct BenchCase {
  const autograd::OpInfo* op;
  std::string shape;                           // the name's tail: "2048x688"
  std::function<Tensors()> inputs;             // f32 floats, i64 indices, fresh each call
  std::function<Tensors(const Tensors&)> run;  // the op on them; its outputs
};

Tensor x_(const Shape& shape, uint64_t seed, float lo = -4, float hi = 4) {
  return bench::lcg_tensor(shape, seed, lo, hi);
}

// n ids in [0, hi) from a fixed LCG.
Tensor ids(const Shape& shape, int64_t hi, uint64_t seed) {
  std::vector<int64_t> v(size_t(numel(shape)));
  uint64_t s = seed;
  for (int64_t& id : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = int64_t((s >> 33) % uint64_t(hi));
  }
  return Tensor::from_vector(v, shape);
}

Tensor mask(const Shape& shape, uint64_t seed) {
  Tensor values = x_(shape, seed, -1, 1);
  Tensor m = Tensor::empty(shape, DType::boolean);
  for (int64_t i = 0; i < m.numel(); ++i) m.data<bool>()[i] = values.data<float>()[i] > 0;
  return m;
}

// Each function of x alone in engine/elementwise_ops.h, on its smooth
// interval widened to [lo, 4] where that is wider.
std::vector<BenchCase> unary_cases() {
  std::vector<BenchCase> cases;
  for (const UnaryOpRow& row : kUnaryOpRows) {
    if (row.takes_scalar) continue;
    const float lo = row.lo > 0 ? float(row.lo) / 2 : -4;
    const UnaryOp op = row.op;
    cases.push_back({&reg::of(op), "2048x688",
                     [lo] {
                       return Tensors{x_({N, F}, 1, lo, 4)};
                     },
                     [op](const Tensors& in) { return Tensors{ops::unary(op, in[0])}; }});
  }
  return cases;
}

BenchCase binary(BinaryOp op, Tensor (*f)(const Tensor&, const Tensor&)) {
  return {&reg::of(op), "2048x256",
          [] {
            return Tensors{x_({N, C}, 2), x_({N, C}, 3, 0.5f, 4)};
          },
          [f](const Tensors& in) { return Tensors{f(in[0], in[1])}; }};
}

// (N, C) activations, for the row ops and the layout ops.
Tensors activations() { return {x_({N, C}, 4)}; }

rng::Generator& generator() {
  static rng::Generator gen(7);
  return gen;
}

std::vector<BenchCase> cases() {
  using ops::AttentionOptions;
  auto q_k_v = [] {
    return Tensors{x_({B, Hq, T, D}, 5), x_({B, Hkv, T, D}, 6), x_({B, Hkv, T, D}, 7)};
  };
  auto router_scores = [] { return ops::softmax(x_({N, E}, 8), -1); };
  std::vector<BenchCase> all = unary_cases();
  all.insert(
      all.end(),
      {
          binary(BinaryOp::add, ops::add),
          binary(BinaryOp::sub, ops::sub),
          binary(BinaryOp::mul, ops::mul),
          binary(BinaryOp::div, ops::div),
          {&reg::of(UnaryOp::pow), "2048x688_cube",
           [] {
             return Tensors{x_({N, F}, 1)};
           },
           [](const Tensors& in) { return Tensors{ops::pow(in[0], 3.0)}; }},
          {&reg::of(UnaryOp::add_scalar), "2048x256", activations,
           [](const Tensors& in) { return Tensors{ops::add(in[0], 0.5)}; }},
          {&reg::of(UnaryOp::mul_scalar), "2048x256", activations,
           [](const Tensors& in) { return Tensors{ops::mul(in[0], 0.5)}; }},
          {&reg::kSwiglu, "2048x688",
           [] {
             return Tensors{x_({N, F}, 9), x_({N, F}, 10)};
           },
           [](const Tensors& in) { return Tensors{ops::swiglu(in[0], in[1])}; }},
          {&reg::kSum, "2048x256_rows", activations,
           [](const Tensors& in) { return Tensors{ops::sum(in[0], {-1})}; }},
          {&reg::kMean, "2048x256_rows", activations,
           [](const Tensors& in) { return Tensors{ops::mean(in[0], {-1})}; }},
          {&reg::kMax, "2048x256_rows", activations,
           [](const Tensors& in) {
             ops::MaxResult m = ops::max(in[0], -1);
             return Tensors{m.values, m.indices};
           }},
          {&reg::kSoftmax, "2048x256", activations,
           [](const Tensors& in) { return Tensors{ops::softmax(in[0], -1)}; }},
          {&reg::kLogSoftmax, "2048x256", activations,
           [](const Tensors& in) { return Tensors{ops::log_softmax(in[0], -1)}; }},
          {&reg::kCrossEntropy, "2048x256",
           [] {
             return Tensors{x_({N, V}, 11), ids({N}, V, 12)};
           },
           [](const Tensors& in) { return Tensors{ops::cross_entropy(in[0], in[1])}; }},
          {&reg::kRmsnorm, "2048x256",
           [] {
             return Tensors{x_({N, C}, 13), x_({C}, 14, 0.5f, 1.5f)};
           },
           [](const Tensors& in) { return Tensors{ops::rmsnorm(in[0], in[1], 1e-6)}; }},
          {&reg::kLayernorm, "2048x256",
           [] {
             return Tensors{x_({N, C}, 15), x_({C}, 16, 0.5f, 1.5f), x_({C}, 17)};
           },
           [](const Tensors& in) { return Tensors{ops::layernorm(in[0], in[1], in[2])}; }},
          {&reg::kRotary, "8x8x256x32",
           [] {
             return Tensors{x_({B, Hq, T, D}, 18)};
           },
           [](const Tensors& in) { return Tensors{ops::rotary(in[0], 0, 10000.0)}; }},
          {&reg::kEmbedding, "256x256_8x256",
           [] {
             return Tensors{x_({V, C}, 19), ids({B, T}, V, 20)};
           },
           [](const Tensors& in) { return Tensors{ops::embedding(in[0], in[1])}; }},
          {&reg::kIndexSelect, "2048x256_rows",
           [] {
             return Tensors{x_({N, C}, 21), ids({N}, N, 22)};
           },
           [](const Tensors& in) { return Tensors{ops::index_select(in[0], 0, in[1])}; }},
          {&reg::kGather, "2048x256_8_per_row",
           [] {
             return Tensors{x_({N, C}, 23), ids({N, 8}, C, 24)};
           },
           [](const Tensors& in) { return Tensors{ops::gather(in[0], 1, in[1])}; }},
          {&reg::kScatterAdd, "2048x256_8_per_row",
           [] {
             return Tensors{x_({N, C}, 25), ids({N, 8}, C, 26), x_({N, 8}, 27)};
           },
           [](const Tensors& in) { return Tensors{ops::scatter_add(in[0], 1, in[1], in[2])}; }},
          {&reg::kIndexAdd, "2048x256_top2_combine",
           [] {
             return Tensors{x_({N, C}, 28), ids({N * K}, N, 29), x_({N * K, C}, 30)};
           },
           [](const Tensors& in) { return Tensors{ops::index_add(in[0], 0, in[1], in[2])}; }},
          {&reg::kWhere, "2048x256",
           [] {
             return Tensors{x_({N, C}, 31), x_({N, C}, 32), mask({N, C}, 33)};
           },
           [](const Tensors& in) { return Tensors{ops::where(in[2], in[0], in[1])}; }},
          {&reg::kTopk, "2048x8_top2",
           [] {
             return Tensors{x_({N, E}, 34)};
           },
           [](const Tensors& in) {
             ops::TopKResult r = ops::topk(in[0], K);
             return Tensors{r.values, r.indices};
           }},
          {&reg::kMatmul, "2048x256_256x688",
           [] {
             return Tensors{x_({N, C}, 35), x_({C, F}, 36)};
           },
           [](const Tensors& in) { return Tensors{ops::matmul(in[0], in[1])}; }},
          {&reg::kLinear, "2048x256_688x256",
           [] {
             return Tensors{x_({N, C}, 37), x_({F, C}, 38)};
           },
           [](const Tensors& in) { return Tensors{ops::linear(in[0], in[1])}; }},
          {&reg::kGroupedLinear, "4096x256_8_experts_688x256",
           [] {
             Tensors in{x_({N * K, C}, 39), Tensor::full({E}, double(N * K / E), DType::i64)};
             for (int64_t e = 0; e < E; ++e) in.push_back(x_({F, C}, 40 + uint64_t(e)));
             return in;
           },
           [](const Tensors& in) {
             return Tensors{ops::grouped_linear(in[0], in[1], Tensors(in.begin() + 2, in.end()))};
           }},
          {&reg::kSdpa, "8x8x256x32_gqa4_causal", q_k_v,
           [](const Tensors& in) {
             AttentionOptions causal;
             causal.causal = true;
             return Tensors{ops::scaled_dot_product_attention(in[0], in[1], in[2], causal)};
           }},
          {&reg::kSdpaDropout, "8x8x256x32_gqa4_causal_p0.1", q_k_v,
           [](const Tensors& in) {
             AttentionOptions options;
             options.causal = true;
             options.dropout_p = 0.1;
             options.generator = &generator();
             return Tensors{ops::scaled_dot_product_attention(in[0], in[1], in[2], options)};
           }},
          {&reg::kMoeRoute, "2048x8_top2", [router_scores] { return Tensors{router_scores()}; },
           [](const Tensors& in) {
             ops::MoeRoute r = ops::moe_route(in[0], K, /*renormalize=*/true);
             return Tensors{r.weights, r.indices, r.token, r.counts};
           }},
          {&reg::kDropout, "2048x256_p0.1", activations,
           [](const Tensors& in) { return Tensors{ops::dropout(in[0], 0.1, generator())}; }},
          {&reg::kCast, "2048x256_to_f64", activations,
           [](const Tensors& in) { return Tensors{ops::cast(in[0], DType::f64)}; }},
          {&reg::kReshape, "2048x256_to_8x256x256", activations,
           [](const Tensors& in) {
             return Tensors{ops::reshape(in[0], {B, T, C})};
           }},
          {&reg::kTranspose, "2048x256", activations,
           [](const Tensors& in) { return Tensors{ops::transpose(in[0], 0, 1)}; }},
          {&reg::kPermute, "8x256x8x32_heads_first",
           [] {
             return Tensors{x_({B, T, Hq, D}, 48)};
           },
           [](const Tensors& in) {
             return Tensors{ops::permute(in[0], {0, 2, 1, 3})};
           }},
          {&reg::kSlice, "2048x256_half", activations,
           [](const Tensors& in) { return Tensors{ops::slice(in[0], 1, 0, C / 2)}; }},
          {&reg::kExpand, "2048x1_to_2048x256",
           [] {
             return Tensors{x_({N, 1}, 49)};
           },
           [](const Tensors& in) {
             return Tensors{ops::expand(in[0], {N, C})};
           }},
          {&reg::kSqueeze, "2048x1x256",
           [] {
             return Tensors{x_({N, 1, C}, 50)};
           },
           [](const Tensors& in) { return Tensors{ops::squeeze(in[0], 1)}; }},
          {&reg::kUnsqueeze, "2048x256", activations,
           [](const Tensors& in) { return Tensors{ops::unsqueeze(in[0], 1)}; }},
          {&reg::kContiguous, "256x2048_transposed", activations,
           [](const Tensors& in) { return Tensors{ops::contiguous(ops::transpose(in[0], 0, 1))}; }},
          {&reg::kCat, "3x2048x256_last_dim",
           [] {
             return Tensors{x_({N, C}, 51), x_({N, C}, 52), x_({N, C}, 53)};
           },
           [](const Tensors& in) { return Tensors{ops::cat(in, -1)}; }},
          {&reg::kSplit, "2048x768_in_3",
           [] {
             return Tensors{x_({N, 3 * C}, 54)};
           },
           [](const Tensors& in) {
             return ops::split(in[0], std::vector<int64_t>{C, C, C}, -1);
           }},
          {&reg::kStack, "3x2048x256",
           [] {
             return Tensors{x_({N, C}, 55), x_({N, C}, 56), x_({N, C}, 57)};
           },
           [](const Tensors& in) { return Tensors{ops::stack(in, 0)}; }},
      });
  return all;
}

// The registered ops without a case, by name.
std::vector<std::string> uncovered(const std::vector<BenchCase>& all) {
  std::set<const autograd::OpInfo*> covered;
  for (const BenchCase& c : all) covered.insert(c.op);
  std::vector<std::string> missing;
  for (const autograd::OpInfo* op : reg::all()) {
    if (!covered.count(op)) missing.push_back(op->name);
  }
  return missing;
}

void forward(benchmark::State& state, const BenchCase& c) {
  NoGradGuard no_grad;
  const Tensors in = c.inputs();
  Tensors out = c.run(in);
  for (auto _ : state) {
    out = c.run(in);
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
  const Tensors in = leaves(c.inputs());
  Tensors wrt, grads;
  for (const Tensor& t : in) {
    if (t.requires_grad()) wrt.push_back(t);
  }
  // Each upstream gradient in its output's dtype (a cast's output is f64).
  for (const Tensor& y : differentiable(c.run(in)))
    grads.push_back(x_(y.shape(), 58, -1, 1).to(y.dtype()));
  for (auto _ : state) {
    Tensors dx = autograd::grad(differentiable(c.run(in)), wrt, grads);
    benchmark::DoNotOptimize(dx[0].raw_data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  static const std::vector<BenchCase> all = cases();
  if (std::vector<std::string> missing = uncovered(all); !missing.empty()) {
    std::fprintf(stderr, "bench_ops: registered ops without a benchmark case:");
    for (const std::string& name : missing) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--check") == 0) {
    std::printf("bench_ops: all %zu registered ops have a case (%zu cases)\n", reg::all().size(),
                all.size());
    return 0;
  }
  for (const BenchCase& c : all) {
    const std::string name = std::string(c.op->name) + "/" + c.shape;
    benchmark::RegisterBenchmark((name + "/fwd").c_str(), forward, c)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    if (c.op->differentiable) {
      benchmark::RegisterBenchmark((name + "/fwd_bwd").c_str(), forward_backward, c)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
