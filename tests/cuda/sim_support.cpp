#include "tests/cuda/sim_support.h"

#include <cmath>
#include <cstring>

#include "tests/support/gradcheck.h"

namespace reprise::testing {

std::vector<Tensor> simulate(const std::function<std::vector<Tensor>(const cuda::SimExec&)>& run) {
  const std::vector<Tensor> forward = run(cuda::SimExec(false));
  const std::vector<Tensor> reverse = run(cuda::SimExec(true));
  EXPECT_EQ(forward.size(), reverse.size());
  for (size_t i = 0; i < forward.size() && i < reverse.size(); ++i)
    EXPECT_TRUE(same_bits(forward[i], reverse[i])) << "result " << i << " races";
  return forward;
}

void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], want[i])) << what << ", result " << i;
}

Tensor random_tensor(const Shape& shape, uint64_t seed, DType dtype, double lo, double hi) {
  return uniform(shape, lo, hi, seed, DType::f64).to(dtype);
}

}  // namespace reprise::testing
