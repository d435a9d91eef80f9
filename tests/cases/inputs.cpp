#include "tests/cases/inputs.h"

#include <algorithm>

namespace reprise::testing {

Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed, DType dtype) {
  std::vector<double> v(size_t(numel(shape)));
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * double(state >> 11) * 0x1.0p-53;
  }
  return Tensor::from_vector(v, shape).to(dtype);
}

Tensor param(const Shape& shape, uint64_t seed, double lo, double hi) {
  return uniform(shape, lo, hi, seed).requires_grad(true);
}

Tensor perf_input(const Shape& shape, uint64_t seed, double lo, double hi) {
  return uniform(shape, lo, hi, seed, DType::f32);
}

Tensor indices(const Shape& shape, int64_t hi, uint64_t seed, DType dtype) {
  std::vector<int64_t> v;
  v.reserve(size_t(numel(shape)));
  for (double d : uniform(shape, 0, double(hi), seed).to_vector<double>())
    v.push_back(std::min(hi - 1, int64_t(d)));
  return Tensor::from_vector(v, shape).to(dtype);
}

Tensor i64(const std::vector<int64_t>& values) { return i64(values, {int64_t(values.size())}); }

Tensor i64(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape);
}

Tensor targets_with_ignored(int64_t N, int64_t C, int64_t ignored) {
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) t[size_t(n)] = n % 3 == 1 ? ignored : (n * 7 + 2) % C;
  return i64(t, {N});
}

Tensor mask(const Shape& shape, uint64_t seed) {
  const std::vector<double> v = uniform(shape, -1, 1, seed).to_vector<double>();
  Tensor t = Tensor::empty(shape, DType::boolean);
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i] > 0;
  return t;
}

}  // namespace reprise::testing
