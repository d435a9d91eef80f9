#include "rng/words.h"

#include <algorithm>

#include "rng/philox.h"

namespace reprise::rng {

void generate_words(uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                    size_t count) {
  const Key key = seed_key(seed);
  while (count > 0) {
    // The rest of the block that holds word `first`.
    const Block b = philox4x32(stream_counter(subsequence, first >> 2), key);
    const size_t lane = size_t(first & 3), n = std::min<size_t>(4 - lane, count);
    std::copy(b.w + lane, b.w + lane + n, out);
    out += n;
    first += n;
    count -= n;
  }
}

}  // namespace reprise::rng
