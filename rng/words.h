#pragma once
// Bulk generation of stream words on the CPU: the words stream_word() gives,
// computed many Philox blocks at a time (32 per AVX-512 step, 16 per AVX2 step,
// one otherwise). Which vector paths exist is decided when the library is
// compiled (__AVX512F__, __AVX2__); every path yields the same words.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace reprise::rng {

enum class Isa : uint8_t { scalar, avx2, avx512 };

const char* to_string(Isa isa);

// The paths this build has, narrowest first; the last is the one used.
const std::vector<Isa>& compiled_isas();

// out[i] = stream_word(seed, subsequence, first + i) for i in [0, count).
void generate_words(uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                    size_t count);

// The same through a given path (tests compare the paths); throws
// reprise::Error when this build lacks it.
void generate_words(Isa isa, uint64_t seed, uint64_t subsequence, uint64_t first, uint32_t* out,
                    size_t count);

}  // namespace reprise::rng
