#pragma once
// A reservation is the exact slice of a counter-based random stream that one
// random op consumed. It is recorded on the op's tape node; running the op
// again with the same reservation reproduces its output bit for bit.

#include <cstdint>
#include <string>

namespace reprise::rng {

struct Reservation {
  uint64_t seed = 0;         // Philox key material (curand_init's seed)
  uint64_t subsequence = 0;  // curand_init's subsequence: one per stream
  uint64_t offset = 0;       // first 32-bit word of the slice (curand_init's offset)
  uint64_t count = 0;        // number of 32-bit words reserved
  uint32_t stream = 0;       // id of the named stream it came from

  friend bool operator==(const Reservation&, const Reservation&) = default;
};

std::string to_string(const Reservation& r);

}  // namespace reprise::rng
