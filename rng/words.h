#pragma once
// Stream words in bulk, one Philox block at a time: the reference the
// backends' vector forms (cpu/philox.h) reproduce, and what host-side users
// (the data loader) call.

#include <cstddef>
#include <cstdint>

namespace reprise::rng {

// out[i] = stream_word(seed, subsequence, first + i) for i in [0, count).
void generate_words(uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                    size_t count);

}  // namespace reprise::rng
