// Cases of matmul and linear: shapes that broadcast, and operands read
// through transposed and strided views.
#include "ops/matmul.h"

#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

OpCase matmul_case(Shape a, Shape b, std::optional<PerfInputs> perf = {}) {
  return {"matmul/" + to_string(a) + "x" + to_string(b),
          [a, b] {
            return Inputs{param(a, 41), param(b, 42)};
          },
          [](const Inputs& in) { return ops::matmul(in[0], in[1]); },
          {},
          std::move(perf)};
}

const RegisterOpCases matmul_cases({
    matmul_case({3, 5}, {5, 7},
                PerfInputs{"2048x256_256x688",
                           [] {
                             return Inputs{perf_input({N, C}, 35), perf_input({C, F}, 36)};
                           }}),
    matmul_case({2, 3, 5}, {5, 4}),        // b shared by the batch: one folded product
    matmul_case({3, 5}, {2, 5, 4}),        // a shared by the batch
    matmul_case({2, 1, 3, 5}, {3, 5, 4}),  // both broadcast
    matmul_case({1, 5}, {5, 1}),
    {"matmul/transposed_a_and_b",  // (3, 5) @ (5, 7) read as column-major views
     [] {
       return Inputs{param({5, 3}, 43), param({7, 5}, 44)};
     },
     [](const Inputs& in) {
       return ops::matmul(ops::transpose(in[0], 0, 1), ops::transpose(in[1], 0, 1));
     }},
    {"matmul/batched_transposed_a",  // (2, 3, 5) from a (2, 5, 3) buffer
     [] {
       return Inputs{param({2, 5, 3}, 45), param({2, 5, 4}, 46)};
     },
     [](const Inputs& in) { return ops::matmul(ops::transpose(in[0], 1, 2), in[1]); }},
    {"linear/2x3x5_w4x5",
     [] {
       return Inputs{param({2, 3, 5}, 47), param({4, 5}, 48)};
     },
     [](const Inputs& in) { return ops::linear(in[0], in[1]); },
     {},
     PerfInputs{"2048x256_688x256",
                [] {
                  return Inputs{perf_input({N, C}, 37), perf_input({F, C}, 38)};
                }}},
    {"linear/1d_x",
     [] {
       return Inputs{param({5}, 49), param({4, 5}, 50)};
     },
     [](const Inputs& in) { return ops::linear(in[0], in[1]); }},
    {"linear/transposed_x_and_w",  // x (3, 5) and w (4, 5) as transposed views
     [] {
       return Inputs{param({5, 3}, 51), param({5, 4}, 52)};
     },
     [](const Inputs& in) {
       return ops::linear(ops::transpose(in[0], 0, 1), ops::transpose(in[1], 0, 1));
     }},
    {"linear/strided_x",  // every other column: neither row- nor column-major, so copied
     [] {
       return Inputs{param({3, 10}, 53), param({4, 5}, 54)};
     },
     [](const Inputs& in) { return ops::linear(ops::slice(in[0], 1, 0, 10, 2), in[1]); }},
});

}  // namespace
}  // namespace reprise::testing
