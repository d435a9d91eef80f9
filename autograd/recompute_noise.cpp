#include "autograd/recompute_noise.h"

#include "engine/backend.h"
#include "engine/functors.h"

namespace reprise::autograd {

Tensor perturb_ulps(const Tensor& t, int k, uint64_t seed, uint64_t salt) {
  if (k <= 0 || !is_floating(t.dtype())) return t;
  return backend_of(t).perturb_ulps(t, k, fn::splitmix64(seed ^ fn::splitmix64(salt)));
}

}  // namespace reprise::autograd
