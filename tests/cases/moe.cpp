// Cases of grouped_linear and moe_route. Routing stays fixed under the
// gradient check, because its step is far below every score gap of the
// data.
#include "ops/grouped_linear.h"
#include "ops/moe_route.h"
#include "ops/softmax.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

// x, the rows per expert, then each expert's weight.
Outputs grouped(const Inputs& in) {
  return ops::grouped_linear(in[0], in[1], Inputs(in.begin() + 2, in.end()));
}

// Blocks of 3, 0 (an empty expert) and 4 rows.
Inputs grouped_inputs() {
  return Inputs{param({7, 5}, 71), i64({3, 0, 4}), param({6, 5}, 72), param({6, 5}, 73),
                param({6, 5}, 74)};
}

// The top-K copies of N tokens, N K / E rows for each of E experts.
Inputs grouped_perf_inputs() {
  Inputs in{perf_input({N * K, C}, 39), Tensor::full({E}, double(N * K / E), DType::i64)};
  for (int64_t e = 0; e < E; ++e) in.push_back(perf_input({F, C}, 40 + uint64_t(e)));
  return in;
}

Outputs route_top2(const Inputs& in) {
  ops::MoeRoute r = ops::moe_route(in[0], 2, /*renormalize=*/true);
  return Outputs(std::vector<Tensor>{r.weights, r.indices, r.token, r.counts});
}

const RegisterOpCases moe_cases({
    {"grouped_linear/3_empty_4",
     grouped_inputs,
     grouped,
     {},
     PerfInputs{"4096x256_8_experts_688x256", grouped_perf_inputs}},
    {"moe_route/top2_of_5_renormalized",
     [] {
       return Inputs{param({6, 5}, 75)};
     },
     [](const Inputs& in) { return ops::moe_route(ops::softmax(in[0], -1), 2, true).weights; }},
    {"moe_route/top3_of_4_raw_capacity_2",
     [] {
       return Inputs{param({6, 4}, 76)};
     },
     [](const Inputs& in) { return ops::moe_route(ops::softmax(in[0], -1), 3, false, 2).weights; }},
    // The router's probabilities as they come, every output of the route.
    {"moe_route/top2_of_8_scores",
     [] {
       return Inputs{param({6, 8}, 77, 0.01, 1)};
     },
     route_top2,
     {},
     PerfInputs{"2048x8_top2",
                [] {
                  return Inputs{ops::softmax(perf_input({N, E}, 8), -1)};
                }}},
});

}  // namespace
}  // namespace reprise::testing
