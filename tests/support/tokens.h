#pragma once
// Token batches for model tests.

#include <cstdint>

#include "engine/tensor.h"

namespace reprise::testing {

// (B, T) int64 token ids in [0, vocab), from a 64-bit linear congruential
// sequence started at `seed`: the same batch on every machine.
Tensor random_token_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed);

}  // namespace reprise::testing
