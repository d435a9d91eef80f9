#include "rng/reservation.h"

namespace reprise::rng {

std::string to_string(const Reservation& r) {
  return "Reservation(seed=" + std::to_string(r.seed) + ", stream=" + std::to_string(r.stream) +
         ", subsequence=" + std::to_string(r.subsequence) + ", offset=" + std::to_string(r.offset) +
         ", count=" + std::to_string(r.count) + ")";
}

}  // namespace reprise::rng
