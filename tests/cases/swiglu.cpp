// Cases of swiglu.
#include "ops/swiglu.h"

#include "ops/cast.h"
#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

const RegisterOpCases swiglu_cases({
    {"swiglu/3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 61, -4, 4), param({3, 5, 7}, 62)};
     },
     [](const Inputs& in) { return ops::swiglu(in[0], in[1]); },
     {},
     PerfInputs{"2048x688",
                [] {
                  return Inputs{perf_input({N, F}, 9), perf_input({N, F}, 10)};
                }}},
    {"swiglu/transposed_gate",
     [] {
       return Inputs{param({6, 4}, 63, -4, 4), param({4, 6}, 64)};
     },
     [](const Inputs& in) { return ops::swiglu(ops::transpose(in[0], 0, 1), in[1]); }},
    // On bf16 values (computed in f32, rounded once), through casts: the
    // tolerance is cast/f64_bf16_f64's, about a bf16 ulp over the step.
    {"swiglu/bf16",
     [] {
       return Inputs{param({3, 5, 7}, 65, -4, 4), param({3, 5, 7}, 66)};
     },
     [](const Inputs& in) {
       return ops::cast(ops::swiglu(ops::cast(in[0], DType::bf16), ops::cast(in[1], DType::bf16)),
                        DType::f64);
     },
     {.eps = 0.25, .atol = 0.05, .rtol = 0}},
});

}  // namespace
}  // namespace reprise::testing
