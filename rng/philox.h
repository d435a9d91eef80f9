#pragma once
// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11), exactly as Random123
// defines it, and the (seed, subsequence, offset) addressing of cuRAND's
// curand_init for curandStatePhilox4_32_10_t.
//
// A counter-based generator is a pure function: block = philox(counter, key).
// Any word of any stream can be computed directly, in any order, on any
// thread, on the CPU or the GPU (every function here is REPRISE_HD). That is
// what makes a recorded reservation replayable without saving state.
//
// Stream addressing (cuRAND's device API):
//   key     = {seed lo32, seed hi32}
//   counter = {block lo32, block hi32, subsequence lo32, subsequence hi32}
//   word `offset` of (seed, subsequence) = philox(counter(block = offset / 4),
//                                                  key)[offset % 4]
// so the n-th value returned by curand() after curand_init(seed, subsequence,
// offset, &state) is stream_word(seed, subsequence, offset + n). cuRAND's
// 128-bit counter would carry from the block into the subsequence after 2^64
// blocks; a 64-bit word index reaches only 2^62 blocks, so it never does.

#include <cstdint>

#include "base/hd.h"

namespace reprise::rng {

// Four 32-bit words: a Philox counter or one output block, word 0 first.
struct Block {
  uint32_t w[4];
};

// The 64-bit Philox4x32 key, word 0 first.
struct Key {
  uint32_t w[2];
};

// Round multipliers and Weyl key increments (the golden ratio and sqrt(3)-1
// in 0.32 fixed point), from Random123.
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

// One Philox round: two 32x32->64 multiplies, then the S-box mixes the high
// halves with the other two words and the round key.
REPRISE_HD Block philox_round(Block c, Key k) {
  const uint64_t p0 = uint64_t{kPhiloxM0} * c.w[0];
  const uint64_t p1 = uint64_t{kPhiloxM1} * c.w[2];
  return Block{{uint32_t(p1 >> 32) ^ c.w[1] ^ k.w[0], uint32_t(p1),
                uint32_t(p0 >> 32) ^ c.w[3] ^ k.w[1], uint32_t(p0)}};
}

// Philox4x32 with `Rounds` rounds; the key is bumped before every round but
// the first. Rounds = 10 is the generator cuRAND and this library use; the
// 7-round variant exists only because Random123 publishes answers for it.
template <int Rounds = 10>
REPRISE_HD Block philox4x32(Block counter, Key key) {
  counter = philox_round(counter, key);
  for (int r = 1; r < Rounds; ++r) {
    key.w[0] += kPhiloxW0;
    key.w[1] += kPhiloxW1;
    counter = philox_round(counter, key);
  }
  return counter;
}

// curand_init's key for `seed`.
REPRISE_HD Key seed_key(uint64_t seed) { return Key{{uint32_t(seed), uint32_t(seed >> 32)}}; }

// The counter of block `block` (words 4*block .. 4*block+3) of `subsequence`.
REPRISE_HD Block stream_counter(uint64_t subsequence, uint64_t block) {
  return Block{
      {uint32_t(block), uint32_t(block >> 32), uint32_t(subsequence), uint32_t(subsequence >> 32)}};
}

// Words 4*block .. 4*block+3 of the stream (seed, subsequence).
REPRISE_HD Block stream_block(uint64_t seed, uint64_t subsequence, uint64_t block) {
  return philox4x32(stream_counter(subsequence, block), seed_key(seed));
}

// Word `offset` of the stream (seed, subsequence): what curand() returns
// first after curand_init(seed, subsequence, offset, &state).
REPRISE_HD uint32_t stream_word(uint64_t seed, uint64_t subsequence, uint64_t offset) {
  return stream_block(seed, subsequence, offset >> 2).w[offset & 3];
}

}  // namespace reprise::rng
