#include "tests/support/tokens.h"

#include <vector>

namespace reprise::testing {

Tensor random_token_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> ids(size_t(B * T));
  uint64_t s = seed;
  for (int64_t& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX constants
    id = int64_t((s >> 33) % uint64_t(vocab));
  }
  return Tensor::from_vector(ids, {B, T});
}

}  // namespace reprise::testing
