// Cases of cast between floating dtypes.
#include "ops/cast.h"

#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

const RegisterOpCases cast_cases({
    // Through f32 and back: the gradient is 1 up to f32 rounding of the
    // difference quotient (about 6e-8 / eps).
    {"cast/f64_f32_f64",
     [] {
       return Inputs{param({3, 5, 7}, 91)};
     },
     [](const Inputs& in) { return ops::cast(ops::cast(in[0], DType::f32), DType::f64); },
     {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-3}},
    {"cast/f64_to_f32_257",
     [] { return Inputs{param({257}, 92)}; },
     [](const Inputs& in) { return ops::cast(in[0], DType::f32); },
     {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-3},
     PerfInputs{"2048x256_f64_to_f32",
                [] {
                  return Inputs{uniform({N, C}, -4, 4, 4)};
                }}},
    // bf16 keeps 8 bits (ulp 2^-7 near 1) and f16 11 bits: a step well above
    // the ulp, and a tolerance of about ulp / eps. A wrong gradient (0, 2)
    // is still far outside it.
    {"cast/f64_bf16_f64",
     [] {
       return Inputs{param({3, 5, 7}, 93)};
     },
     [](const Inputs& in) { return ops::cast(ops::cast(in[0], DType::bf16), DType::f64); },
     {.eps = 0.25, .atol = 0.02, .rtol = 0}},
    {"cast/f64_f16_f64",
     [] {
       return Inputs{param({3, 5, 7}, 94)};
     },
     [](const Inputs& in) { return ops::cast(ops::cast(in[0], DType::f16), DType::f64); },
     {.eps = 0.05, .atol = 0.02, .rtol = 0}},
});

}  // namespace
}  // namespace reprise::testing
