#include "tests/cuda/sim_support.h"

#include <cmath>
#include <cstring>

#include "tests/support/gradcheck.h"

namespace reprise::testing {

::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const std::vector<double> x = ac.to_vector<double>(), y = bc.to_vector<double>();
  const auto* pa = static_cast<const unsigned char*>(ac.raw_data());
  const auto* pb = static_cast<const unsigned char*>(bc.raw_data());
  const size_t width = a.element_size();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::memcmp(pa + i * width, pb + i * width, width) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionSuccess();
}

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
