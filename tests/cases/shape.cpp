// Cases of cat, split and stack.
#include "ops/shape.h"

#include "ops/binary.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

const RegisterOpCases shape_cases({
    {"cat/3x5x7+3x2x7_dim1",
     [] {
       return Inputs{param({3, 5, 7}, 51), param({3, 2, 7}, 52)};
     },
     [](const Inputs& in) {
       return ops::cat({in[0], in[1]}, 1);
     }},
    // Three inputs along the last dim, one of them a transposed view and
    // one used twice (its gradient is the sum of two slices).
    {"cat/last_dim_views_repeat",
     [] {
       return Inputs{param({3, 5}, 53), param({5, 3}, 54)};
     },
     [](const Inputs& in) {
       Tensor t = ops::transpose(in[1], 0, 1);
       return ops::tanh(ops::cat({in[0], t, in[0]}, -1));
     }},
    {"cat/three_last_dim",
     [] {
       return Inputs{param({3, 5}, 61), param({3, 2}, 62), param({3, 4}, 63)};
     },
     [](const Inputs& in) { return ops::cat(in, -1); },
     {},
     PerfInputs{
         "3x2048x256_last_dim",
         [] {
           return Inputs{perf_input({N, C}, 51), perf_input({N, C}, 52), perf_input({N, C}, 53)};
         }}},
    // Pieces 0 and 2 used, piece 1 not: its part of dx must be zero.
    {"split/sizes_2_3_2_dim2",
     [] {
       return Inputs{param({3, 5, 7}, 55)};
     },
     [](const Inputs& in) {
       std::vector<Tensor> p = ops::split(in[0], {2, 3, 2}, 2);
       return ops::cat({ops::mul(p[0], p[0]), ops::exp(p[2])}, 2);
     }},
    // Chunks of 2 over a dim of 5: sizes 2, 2, 1.
    {"split/chunk2_of_5",
     [] {
       return Inputs{param({3, 5, 7}, 56)};
     },
     [](const Inputs& in) {
       std::vector<Tensor> p = ops::split(in[0], 2, 1);
       return ops::cat({ops::sigmoid(p[2]), ops::mul(p[0], p[1])}, 1);
     }},
    // Three equal pieces of the last dim, each taking a gradient.
    {"split/thirds_last_dim",
     [] {
       return Inputs{param({3, 6}, 64)};
     },
     [](const Inputs& in) { return Outputs(ops::split(in[0], in[0].size(-1) / 3, -1)); },
     {},
     PerfInputs{"2048x768_in_3",
                [] {
                  return Inputs{perf_input({N, 3 * C}, 54)};
                }}},
    {"stack/dim1_repeat",
     [] {
       return Inputs{param({3, 5}, 57), param({3, 5}, 58)};
     },
     [](const Inputs& in) {
       return ops::tanh(ops::stack({in[0], in[1], in[0]}, 1));
     }},
    {"stack/dim_last_3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 59), param({3, 5, 7}, 60)};
     },
     [](const Inputs& in) {
       return ops::stack({in[0], in[1]}, -1);
     }},
    {"stack/dim0_three",
     [] {
       return Inputs{param({3, 5}, 65), param({3, 5}, 66), param({3, 5}, 67)};
     },
     [](const Inputs& in) { return ops::stack(in, 0); },
     {},
     PerfInputs{
         "3x2048x256",
         [] {
           return Inputs{perf_input({N, C}, 55), perf_input({N, C}, 56), perf_input({N, C}, 57)};
         }}},
});

}  // namespace
}  // namespace reprise::testing
