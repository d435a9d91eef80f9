// Cases of dropout.
#include "ops/random.h"

#include "ops/views.h"
#include "rng/generator.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

// Each evaluation builds a fresh Generator with the same seed, so every
// central difference sees the same reservation, hence the same mask, and
// the analytic gradient regenerates that mask in backward.
OpFn dropout_fn(double p, bool transposed = false) {
  return [p, transposed](const Inputs& in) {
    rng::Generator gen(42);
    return ops::dropout(transposed ? ops::transpose(in[0], 0, 1) : in[0], p, gen);
  };
}

const RegisterOpCases random_cases({
    {"dropout/p0.3_3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 21)};
     },
     dropout_fn(0.3)},
    {"dropout/p0.5_257", [] { return Inputs{param({257}, 22)}; }, dropout_fn(0.5)},
    {"dropout/p0.2_transposed_9x13",
     [] {
       return Inputs{param({13, 9}, 23)};
     },
     dropout_fn(0.2, true)},
    {"dropout/p0.1_9x13",
     [] {
       return Inputs{param({9, 13}, 24)};
     },
     dropout_fn(0.1),
     {},
     PerfInputs{"2048x256_p0.1",
                [] {
                  return Inputs{perf_input({N, C}, 4)};
                }}},
});

}  // namespace
}  // namespace reprise::testing
