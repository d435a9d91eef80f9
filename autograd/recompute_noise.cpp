#include "autograd/recompute_noise.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace reprise::autograd {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class F>
F step_ulps(F v, int64_t d) {
  for (; d > 0; --d) v = std::nextafter(v, std::numeric_limits<F>::infinity());
  for (; d < 0; ++d) v = std::nextafter(v, -std::numeric_limits<F>::infinity());
  return v;
}

}  // namespace

Tensor perturb_ulps(const Tensor& t, int k, uint64_t seed, uint64_t salt) {
  if (k <= 0 || !(t.dtype() == DType::f32 || t.dtype() == DType::f64)) return t;
  Tensor out = t.contiguous().clone();
  dispatch_float(out.dtype(), "perturb_ulps", [&]<class F>() {
    F* p = out.data<F>();
    uint64_t base = mix(seed ^ mix(salt));
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (!std::isfinite(p[i])) continue;
      int64_t d = int64_t(mix(base + uint64_t(i)) % uint64_t(2 * k + 1)) - k;
      F moved = step_ulps(p[i], d);
      if (std::isfinite(moved)) p[i] = moved;
    }
  });
  return out;
}

}  // namespace reprise::autograd
