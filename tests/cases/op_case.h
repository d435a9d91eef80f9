#pragma once
// The op case table. A case is one function of its inputs with two input
// sets: small f64 ones, which the tests in tests/ops run three ways (the f64
// gradient check, every CPU capability against scalar, the CUDA kernels on
// the simulator and on a device), and, for one case per registered op,
// model-sized f32 ones, which bench_ops times beside PyTorch
// (bench/ops/ops.cpp). Each op family registers its cases from its own file
// in this folder with a static RegisterOpCases; the test and bench programs
// link the folder as an object library, so every registration is kept.

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::testing {

using Inputs = std::vector<Tensor>;

// What a case's function returns: one tensor, or several (max's values and
// indices, split's pieces). Gradients flow from the floating outputs only.
struct Outputs : std::vector<Tensor> {
  Outputs(Tensor t) : std::vector<Tensor>{std::move(t)} {}  // NOLINT: implicit by design
  Outputs(std::vector<Tensor> ts) : std::vector<Tensor>(std::move(ts)) {}  // NOLINT
};

using OpFn = std::function<Outputs(const Inputs&)>;

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-7;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
};

// The model-sized input set of a case: the Llama example's sizes (see
// perf_sizes below), f32 floats and i64 indices, made fresh on each call.
struct PerfInputs {
  std::string shape;  // the benchmark name's tail: "silu/2048x688" has "2048x688"
  std::function<Inputs()> inputs;
};

struct OpCase {
  std::string name;                // "silu/3x5x7": the registered op, then what is special
  std::function<Inputs()> inputs;  // f64; differentiable ones require grad
  OpFn fn;
  GradcheckOptions options = {};
  std::optional<PerfInputs> perf = {};  // set on the one case per op that bench_ops times
};

std::vector<OpCase>& op_cases();

// GoogleTest prints a parameter by its name.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// The registered op a case exercises: its name up to the first '/'.
std::string op_of(const OpCase& c);

struct RegisterOpCases {
  explicit RegisterOpCases(std::vector<OpCase> cases);
};

// The sizes of the perf input sets: the Llama example's N = 2048 tokens
// (batch B 8 x sequence T 256), hidden C 256, intermediate F 688, Hq 8
// query and Hkv 4 key/value heads of D 32, vocabulary V 256, and for the
// MoE ops E 8 experts with top-K 2 routing.
namespace perf_sizes {
constexpr int64_t N = 2048, C = 256, F = 688, B = 8, T = 256, Hq = 8, Hkv = 4, D = 32, V = 256;
constexpr int64_t E = 8, K = 2;
}  // namespace perf_sizes

}  // namespace reprise::testing
