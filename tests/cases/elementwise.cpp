// Cases of the elementwise ops (engine/elementwise_ops.h), the reductions
// and the layout ops.
#include "ops/binary.h"
#include "ops/clamp.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

// One case per function of x alone in the elementwise table, on its smooth
// interval; timed on (N, F), that interval widened to [lo, 4].
std::vector<OpCase> unary_cases_from_table() {
  std::vector<OpCase> cases;
  for (const UnaryOpRow& row : kUnaryOpRows) {
    if (row.takes_scalar) continue;
    const UnaryOp op = row.op;
    const double perf_lo = row.lo > 0 ? row.lo / 2 : -4;
    cases.push_back({std::string(row.name) + "/3x5x7",
                     [lo = row.lo, hi = row.hi] {
                       return Inputs{param({3, 5, 7}, 11, lo, hi)};
                     },
                     [op](const Inputs& in) { return ops::unary(op, in[0]); },
                     {},
                     PerfInputs{"2048x688", [perf_lo] {
                                  return Inputs{perf_input({N, F}, 1, perf_lo, 4)};
                                }}});
  }
  return cases;
}

const RegisterOpCases unary_cases(unary_cases_from_table());

// (N, C) activations, for the row ops and the layout ops.
PerfInputs activations(std::string shape) {
  return {std::move(shape), [] { return Inputs{perf_input({N, C}, 4)}; }};
}

const RegisterOpCases scalar_cases({
    {"pow/2.5_257", [] { return Inputs{param({257}, 12, 0.2, 2)}; },
     [](const Inputs& in) { return ops::pow(in[0], 2.5); }},
    {"pow/2_257", [] { return Inputs{param({257}, 13)}; },
     [](const Inputs& in) { return ops::pow(in[0], 2.0); }},
    {"pow/3_257",
     [] { return Inputs{param({257}, 14)}; },
     [](const Inputs& in) { return ops::pow(in[0], 3.0); },
     {},
     PerfInputs{"2048x688_cube",
                [] {
                  return Inputs{perf_input({N, F}, 1)};
                }}},
    {"add_scalar/3x5",
     [] {
       return Inputs{param({3, 5}, 23)};
     },
     [](const Inputs& in) { return ops::add(in[0], 1.5); },
     {},
     activations("2048x256")},
    {"mul_scalar/3x5",
     [] {
       return Inputs{param({3, 5}, 24)};
     },
     [](const Inputs& in) { return ops::mul(in[0], -0.75); },
     {},
     activations("2048x256")},
});

// A binary op's case on shapes a and b, the divisor kept on [0.5, 2];
// `timed` ones run on two (N, C) operands.
OpCase binary_case(std::string name, Tensor (*f)(const Tensor&, const Tensor&), Shape a, Shape b,
                   bool timed = false) {
  std::optional<PerfInputs> perf;
  if (timed) {
    perf = PerfInputs{"2048x256", [] {
                        return Inputs{perf_input({N, C}, 2), perf_input({N, C}, 3, 0.5, 4)};
                      }};
  }
  return {name + "/" + to_string(a) + "x" + to_string(b),
          [a, b] {
            return Inputs{param(a, 21), param(b, 22, 0.5, 2.0)};
          },
          [f](const Inputs& in) { return f(in[0], in[1]); },
          {},
          perf};
}

const RegisterOpCases binary_cases({
    binary_case("add", ops::add, {3, 5, 7}, {3, 5, 7}, /*timed=*/true),
    binary_case("add", ops::add, {3, 5, 7}, {5, 1}),
    binary_case("sub", ops::sub, {3, 1, 7}, {5, 7}, /*timed=*/true),
    binary_case("mul", ops::mul, {3, 5, 7}, {7}, /*timed=*/true),
    binary_case("mul", ops::mul, {1, 5, 1}, {3, 1, 7}),
    binary_case("div", ops::div, {3, 5, 7}, {3, 5, 7}, /*timed=*/true),
    binary_case("div", ops::div, {4, 6}, {4, 1}),
    binary_case("maximum", ops::maximum, {3, 5, 7}, {3, 5, 7}, /*timed=*/true),
    binary_case("maximum", ops::maximum, {3, 1, 7}, {5, 1}),
    binary_case("minimum", ops::minimum, {3, 5, 7}, {3, 5, 7}, /*timed=*/true),
    binary_case("minimum", ops::minimum, {4, 6}, {6}),
});

// Scalar bounds, one bound, and tensor bounds that broadcast (each taking
// its gradient where it was taken).
const RegisterOpCases clamp_cases({
    {"clamp/scalars_3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 25)};
     },
     [](const Inputs& in) { return ops::clamp(in[0], -0.4, 0.5); },
     {},
     activations("2048x256")},
    {"clamp/max_only_257", [] { return Inputs{param({257}, 26)}; },
     [](const Inputs& in) { return ops::clamp(in[0], std::nullopt, 0.25); }},
    {"clamp/tensors_3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 27), param({5, 1}, 28, -0.9, -0.2), param({7}, 29, 0.2, 0.9)};
     },
     [](const Inputs& in) { return ops::clamp(in[0], in[1], in[2]); }},
});

const RegisterOpCases reduce_cases({
    {"sum/all",
     [] {
       return Inputs{param({3, 5, 7}, 31)};
     },
     [](const Inputs& in) { return ops::sum(in[0]); }},
    {"sum/dim1_keepdim",
     [] {
       return Inputs{param({3, 5, 7}, 32)};
     },
     [](const Inputs& in) { return ops::sum(in[0], {1}, true); }},
    {"sum/dims0_2",
     [] {
       return Inputs{param({3, 5, 7}, 33)};
     },
     [](const Inputs& in) {
       return ops::sum(in[0], {0, 2});
     }},
    {"sum/last",
     [] {
       return Inputs{param({3, 5, 7}, 37)};
     },
     [](const Inputs& in) { return ops::sum(in[0], {-1}); },
     {},
     activations("2048x256_rows")},
    {"mean/last",
     [] {
       return Inputs{param({3, 5, 7}, 34)};
     },
     [](const Inputs& in) { return ops::mean(in[0], {-1}); },
     {},
     activations("2048x256_rows")},
    {"max/last",
     [] {
       return Inputs{param({3, 5, 7}, 35)};
     },
     [](const Inputs& in) {
       ops::MaxResult m = ops::max(in[0], -1);
       return Outputs(std::vector<Tensor>{m.values, m.indices});
     },
     {},
     activations("2048x256_rows")},
    {"max/dim1",
     [] {
       return Inputs{param({3, 5, 7}, 38)};
     },
     [](const Inputs& in) { return ops::max(in[0], 1).values; }},
    {"max/dim0_keepdim",
     [] {
       return Inputs{param({4, 6}, 36)};
     },
     [](const Inputs& in) { return ops::max(in[0], 0, true).values; }},
    {"cumsum/last",
     [] {
       return Inputs{param({3, 5, 7}, 39)};
     },
     [](const Inputs& in) { return ops::cumsum(in[0], -1); },
     {},
     activations("2048x256_rows")},
    {"cumsum/dim1",
     [] {
       return Inputs{param({3, 5, 7}, 40)};
     },
     [](const Inputs& in) { return ops::cumsum(in[0], 1); }},
    // A transposed x along its first dim, and a 0-dim one.
    {"cumsum/dim0_view",
     [] {
       return Inputs{param({6, 4}, 41)};
     },
     [](const Inputs& in) { return ops::cumsum(ops::transpose(in[0], 0, 1), 0); }},
    {"cumsum/scalar", [] { return Inputs{param({}, 42)}; },
     [](const Inputs& in) { return ops::cumsum(in[0], 0); }},
});

// Each view alone (its gradient lays dy out as x), and inside an op that
// reads it, which checks the strides it hands on.
const RegisterOpCases view_cases({
    {"reshape/3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 41)};
     },
     [](const Inputs& in) {
       return ops::mul(ops::reshape(in[0], {15, -1}), ops::reshape(in[0], {15, 7}));
     }},
    // (8 n, m) to (8, n, m): the tokens of a batch of 8.
    {"reshape/rows_into_batch_of_8",
     [] {
       return Inputs{param({16, 3}, 49)};
     },
     [](const Inputs& in) {
       return ops::reshape(in[0], {8, -1, in[0].size(-1)});
     },
     {},
     activations("2048x256_to_8x256x256")},
    {"transpose/3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 42)};
     },
     [](const Inputs& in) { return ops::exp(ops::transpose(in[0], 0, 2)); }},
    {"transpose/3x5",
     [] {
       return Inputs{param({3, 5}, 50)};
     },
     [](const Inputs& in) { return ops::transpose(in[0], 0, 1); },
     {},
     activations("2048x256")},
    {"permute/3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 43)};
     },
     [](const Inputs& in) {
       return ops::tanh(ops::permute(in[0], {1, 2, 0}));
     }},
    {"permute/heads_first_2x3x4x5",
     [] {
       return Inputs{param({2, 3, 4, 5}, 51)};
     },
     [](const Inputs& in) {
       return ops::permute(in[0], {0, 2, 1, 3});
     },
     {},
     PerfInputs{"8x256x8x32_heads_first",
                [] {
                  return Inputs{perf_input({B, T, Hq, D}, 48)};
                }}},
    {"slice/step2",
     [] {
       return Inputs{param({9, 5}, 44)};
     },
     [](const Inputs& in) { return ops::sigmoid(ops::slice(in[0], 0, 1, 8, 2)); }},
    {"slice/first_half_of_rows",
     [] {
       return Inputs{param({3, 6}, 52)};
     },
     [](const Inputs& in) { return ops::slice(in[0], 1, 0, in[0].size(1) / 2); },
     {},
     activations("2048x256_half")},
    {"expand/5x1_to_3x5x7",
     [] {
       return Inputs{param({5, 1}, 45)};
     },
     [](const Inputs& in) {
       return ops::tanh(ops::expand(in[0], {3, 5, 7}));
     }},
    // (n, 1) to (n, n / 8): 2048x1 to 2048x256.
    {"expand/column_to_rows",
     [] {
       return Inputs{param({16, 1}, 53)};
     },
     [](const Inputs& in) {
       return ops::expand(in[0], {in[0].size(0), in[0].size(0) / 8});
     },
     {},
     PerfInputs{"2048x1_to_2048x256",
                [] {
                  return Inputs{perf_input({N, 1}, 49)};
                }}},
    {"squeeze/3x1x7",
     [] {
       return Inputs{param({3, 1, 7}, 46)};
     },
     [](const Inputs& in) { return ops::squeeze(in[0], 1); },
     {},
     PerfInputs{"2048x1x256",
                [] {
                  return Inputs{perf_input({N, 1, C}, 50)};
                }}},
    {"unsqueeze/3x7",
     [] {
       return Inputs{param({3, 7}, 47)};
     },
     [](const Inputs& in) { return ops::unsqueeze(in[0], 1); },
     {},
     activations("2048x256")},
    {"contiguous/transposed_5x7",
     [] {
       return Inputs{param({7, 5}, 48)};
     },
     [](const Inputs& in) { return ops::contiguous(ops::transpose(in[0], 0, 1)); },
     {},
     activations("256x2048_transposed")},
});

}  // namespace
}  // namespace reprise::testing
