// Cases of gated_delta_rule: a few positions, positions past a checkpoint
// block (the backward recomputes two blocks), several heads with an
// initial state, and decays near 0 and 1.
#include "ops/delta_rule.h"

#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

// q, k (B, T, H, K), v (B, T, H, V), decay in [lo, 1), beta in [0, 1).
Inputs delta_rule_inputs(int64_t B, int64_t T_, int64_t H, int64_t K, int64_t V, uint64_t seed,
                         double decay_lo = 0.5) {
  return Inputs{param({B, T_, H, K}, seed), param({B, T_, H, K}, seed + 1),
                param({B, T_, H, V}, seed + 2), param({B, T_, H}, seed + 3, decay_lo, 1.0),
                param({B, T_, H}, seed + 4, 0.0, 1.0)};
}

OpFn delta_rule_fn() {
  return
      [](const Inputs& in) { return ops::gated_delta_rule(in[0], in[1], in[2], in[3], in[4]).out; };
}

const RegisterOpCases delta_rule_cases({
    {"gated_delta_rule/2x5x3x4x3",
     [] { return delta_rule_inputs(2, 5, 3, 4, 3, 71); },
     delta_rule_fn(),
     {},
     PerfInputs{"8x256x4x32x32",
                [] {
                  return Inputs{perf_input({B, T, 4, D}, 11, -0.2, 0.2),
                                perf_input({B, T, 4, D}, 12, -0.2, 0.2),
                                perf_input({B, T, 4, D}, 13), perf_input({B, T, 4}, 14, 0.5, 1.0),
                                perf_input({B, T, 4}, 15, 0.0, 1.0)};
                }}},
    {"gated_delta_rule/past_a_block", [] { return delta_rule_inputs(1, 67, 2, 3, 2, 76, 0.9); },
     delta_rule_fn()},
    {"gated_delta_rule/initial_state",
     [] {
       Inputs in = delta_rule_inputs(2, 4, 2, 3, 5, 81, 0.0);
       in.push_back(param({2, 2, 3, 5}, 86).detach());
       return in;
     },
     // The final state takes no gradient, so only out is checked here
     // (tests/ops/delta_rule_test.cpp checks the state's values).
     [](const Inputs& in) {
       return ops::gated_delta_rule(in[0], in[1], in[2], in[3], in[4], in[5]).out;
     }},
});

}  // namespace
}  // namespace reprise::testing
