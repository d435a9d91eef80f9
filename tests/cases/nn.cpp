// Cases of softmax, log_softmax, cross_entropy, rmsnorm, layernorm,
// rotary and embedding.
#include "ops/cast.h"
#include "ops/embedding.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/rotary.h"
#include "ops/softmax.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

const RegisterOpCases softmax_cases({
    {"softmax/3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 101, -3, 3)};
     },
     [](const Inputs& in) { return ops::softmax(in[0], -1); },
     {},
     PerfInputs{"2048x256",
                [] {
                  return Inputs{perf_input({N, C}, 4)};
                }}},
    {"softmax/3x5x7_dim1",
     [] {
       return Inputs{param({3, 5, 7}, 102, -3, 3)};
     },
     [](const Inputs& in) { return ops::softmax(in[0], 1); }},
    {"softmax/257", [] { return Inputs{param({257}, 103, -3, 3)}; },
     [](const Inputs& in) { return ops::softmax(in[0]); }},
    {"log_softmax/3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 104, -3, 3)};
     },
     [](const Inputs& in) { return ops::log_softmax(in[0]); },
     {},
     PerfInputs{"2048x256",
                [] {
                  return Inputs{perf_input({N, C}, 4)};
                }}},
    {"log_softmax/3x5x7_dim0",
     [] {
       return Inputs{param({3, 5, 7}, 105, -3, 3)};
     },
     [](const Inputs& in) { return ops::log_softmax(in[0], 0); }},
});
const RegisterOpCases cross_entropy_cases({
    {"cross_entropy/mean_9x13_ignored",
     [] {
       return Inputs{param({9, 13}, 111, -3, 3), targets_with_ignored(9, 13, -100)};
     },
     [](const Inputs& in) { return ops::cross_entropy(in[0], in[1]); }},
    {"cross_entropy/sum_9x13_ignore_index_4",
     [] {
       return Inputs{param({9, 13}, 112, -3, 3), targets_with_ignored(9, 13, 4)};
     },
     [](const Inputs& in) { return ops::cross_entropy(in[0], in[1], 4, ops::Reduction::sum); }},
    {"cross_entropy/mean_5x257",
     [] {
       return Inputs{param({5, 257}, 113, -3, 3), i64({0, 256, 17, 100, 3}, {5})};
     },
     [](const Inputs& in) { return ops::cross_entropy(in[0], in[1]); },
     {},
     PerfInputs{"2048x256",
                [] {
                  return Inputs{perf_input({N, V}, 11), indices({N}, V, 12)};
                }}},
    // bf16 logits (computed in f32, the gradient rounded once), through a
    // cast: the tolerance is about a bf16 ulp of the inputs over the step.
    {"cross_entropy/bf16_9x37_ignored",
     [] {
       return Inputs{param({9, 37}, 114, -3, 3), targets_with_ignored(9, 37, -100)};
     },
     [](const Inputs& in) {
       return ops::cast(ops::cross_entropy(ops::cast(in[0], DType::bf16), in[1]), DType::f64);
     },
     {.eps = 0.25, .atol = 0.02, .rtol = 0}},
});
const RegisterOpCases norm_cases({
    {"rmsnorm/3x5x7_x_w",
     [] {
       return Inputs{param({3, 5, 7}, 121), param({7}, 122, 0.5, 1.5)};
     },
     [](const Inputs& in) { return ops::rmsnorm(in[0], in[1], 1e-6); },
     {},
     PerfInputs{"2048x256",
                [] {
                  return Inputs{perf_input({N, C}, 13), perf_input({C}, 14, 0.5, 1.5)};
                }}},
    {"rmsnorm/3x257_w_only",
     [] {
       return Inputs{uniform({3, 257}, -1, 1, 123), param({257}, 124, 0.5, 1.5)};
     },
     [](const Inputs& in) { return ops::rmsnorm(in[0], in[1], 1e-5); }},
    {"rmsnorm/transposed_x",
     [] {
       return Inputs{param({5, 3, 7}, 125), param({7}, 126, 0.5, 1.5)};
     },
     [](const Inputs& in) { return ops::rmsnorm(ops::transpose(in[0], 0, 1), in[1]); }},
    {"layernorm/3x5x7_bias",
     [] {
       return Inputs{param({3, 5, 7}, 131), param({7}, 132, 0.5, 1.5), param({7}, 133)};
     },
     [](const Inputs& in) { return ops::layernorm(in[0], in[1], in[2]); },
     {},
     PerfInputs{"2048x256",
                [] {
                  return Inputs{perf_input({N, C}, 15), perf_input({C}, 16, 0.5, 1.5),
                                perf_input({C}, 17)};
                }}},
    {"layernorm/3x5x7_no_bias",
     [] {
       return Inputs{param({3, 5, 7}, 134), param({7}, 135, 0.5, 1.5)};
     },
     [](const Inputs& in) { return ops::layernorm(in[0], in[1], Tensor(), 1e-5); }},
    {"layernorm/4x257_w_b_only",
     [] {
       return Inputs{uniform({4, 257}, -1, 1, 136), param({257}, 137, 0.5, 1.5), param({257}, 138)};
     },
     [](const Inputs& in) { return ops::layernorm(in[0], in[1], in[2]); }},
});
const RegisterOpCases rotary_cases({
    {"rotary/2x3x5x8_positions_T",
     [] {
       return Inputs{param({2, 3, 5, 8}, 141), i64({0, 1, 2, 7, 30}, {5})};
     },
     [](const Inputs& in) { return ops::rotary(in[0], in[1], 10000.0); }},
    {"rotary/2x3x5x6_positions_BT",
     [] {
       return Inputs{param({2, 3, 5, 6}, 142), i64({0, 1, 2, 3, 4, 9, 8, 7, 6, 5}, {2, 5})};
     },
     [](const Inputs& in) { return ops::rotary(in[0], in[1], 500.0); }},
    {"rotary/2x3x5x8_start_0",
     [] {
       return Inputs{param({2, 3, 5, 8}, 144)};
     },
     [](const Inputs& in) { return ops::rotary(in[0], 0, 10000.0); },
     {},
     PerfInputs{"8x8x256x32",
                [] {
                  return Inputs{perf_input({B, Hq, T, D}, 18)};
                }}},
    {"rotary/start_offset_transposed",
     [] {
       return Inputs{param({2, 5, 3, 4}, 143)};
     },
     [](const Inputs& in) { return ops::rotary(ops::transpose(in[0], 1, 2), 11, 10000.0); }},
    // bf16 q or k under autocast (rotated in f32, rounded once), through
    // casts, with swiglu/bf16's tolerance.
    {"rotary/bf16_2x3x5x8",
     [] {
       return Inputs{param({2, 3, 5, 8}, 145, -4, 4)};
     },
     [](const Inputs& in) {
       return ops::cast(ops::rotary(ops::cast(in[0], DType::bf16), 3, 10000.0), DType::f64);
     },
     {.eps = 0.25, .atol = 0.05, .rtol = 0}},
});
const RegisterOpCases embedding_cases({
    {"embedding/11x7_repeated_ids",
     [] {
       return Inputs{param({11, 7}, 151),
                     i64({3, 0, 3, 10, 3, 5, 0, 9, 3, 1, 2, 10, 4, 3, 3}, {3, 5})};
     },
     [](const Inputs& in) { return ops::embedding(in[0], in[1]); },
     {},
     PerfInputs{"256x256_8x256",
                [] {
                  return Inputs{perf_input({V, C}, 19), indices({B, T}, V, 20)};
                }}},
    {"embedding/5x3_i32_ids",
     [] {
       return Inputs{param({5, 3}, 152),
                     Tensor::from_vector(std::vector<int32_t>{4, 4, 1, 0, 4}, {5})};
     },
     [](const Inputs& in) { return ops::embedding(in[0], in[1]); }},
});

}  // namespace
}  // namespace reprise::testing
