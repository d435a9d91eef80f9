// autograd::perturb_ulps, the recompute noise: each element moves by at
// most k units in the last place of its own dtype, f32 and the 16-bit
// floats alike (a bf16 ulp is 2^16 f32 ulps); the same call moves the
// same way; inf, NaN and integer tensors stay as they are.
#include "autograd/recompute_noise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace reprise::autograd {
namespace {

// The bit pattern of a finite value as a sign-magnitude integer: adjacent
// representable values differ by 1.
template <class Bits>
int64_t ordered(Bits bits) {
  constexpr Bits sign = Bits(1) << (8 * sizeof(Bits) - 1);
  const int64_t magnitude = int64_t(bits & Bits(sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

template <class Bits>
std::vector<Bits> raw(const Tensor& t) {
  std::vector<Bits> out(size_t(t.numel()));
  std::memcpy(out.data(), t.contiguous().raw_data(), t.nbytes());
  return out;
}

// Moves within [-k, k] steps of x's own dtype, and moves most elements.
template <class Bits>
void expect_within_ulps(const Tensor& x, const Tensor& y, int k) {
  const std::vector<Bits> a = raw<Bits>(x), b = raw<Bits>(y);
  int moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t d = ordered(b[i]) - ordered(a[i]);
    EXPECT_LE(std::abs(d), k) << "element " << i;
    moved += d != 0;
  }
  EXPECT_GT(moved, int(a.size()) / 2);
}

TEST(RecomputeNoise, MovesEachElementByUpToKUlpsOfItsDtype) {
  std::vector<float> v;
  for (int i = 0; i < 200; ++i) v.push_back(float(i - 100) * 0.37f);
  const Tensor x32 = Tensor::from_vector(v, {200});
  for (int k : {1, 3}) {
    expect_within_ulps<uint32_t>(x32, perturb_ulps(x32, k, 7, 1), k);
    const Tensor xb = x32.to(DType::bf16), xh = x32.to(DType::f16);
    expect_within_ulps<uint16_t>(xb, perturb_ulps(xb, k, 7, 1), k);
    expect_within_ulps<uint16_t>(xh, perturb_ulps(xh, k, 7, 1), k);
  }
  const Tensor xb = x32.to(DType::bf16);
  EXPECT_EQ(raw<uint16_t>(perturb_ulps(xb, 2, 7, 1)), raw<uint16_t>(perturb_ulps(xb, 2, 7, 1)));
  EXPECT_NE(raw<uint16_t>(perturb_ulps(xb, 2, 7, 1)), raw<uint16_t>(perturb_ulps(xb, 2, 8, 1)));
}

TEST(RecomputeNoise, LeavesNonFiniteValuesAndIntegersAlone) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector(std::vector<float>{inf, -inf, std::nanf("")}, {3});
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor t = x.to(dt), y = perturb_ulps(t, 5, 3, 4);
    EXPECT_EQ(std::memcmp(t.raw_data(), y.raw_data(), t.nbytes()), 0) << dtype_name(dt);
  }
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  EXPECT_EQ(perturb_ulps(ids, 5, 3, 4).to_vector<int64_t>(), ids.to_vector<int64_t>());
}

}  // namespace
}  // namespace reprise::autograd
