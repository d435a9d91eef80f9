// Philox4x32: Random123's known answers, the curand_init addressing, and
// bulk word generation through every compiled vector path.
#include "rng/philox.h"

#include <gtest/gtest.h>

#include <vector>

#include "rng/words.h"

namespace reprise::rng {
namespace {

struct Kat {
  Block counter;
  Key key;
  Block expected;
};

// From Random123's kat_vectors (philox4x32 lines): counter, key, output.
const Kat kKat10[] = {
    {{{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};
const Kat kKat7[] = {
    {{{0, 0, 0, 0}}, {{0, 0}}, {{0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}}},
};

template <int Rounds>
void expect_kat(const Kat& kat) {
  const Block out = philox4x32<Rounds>(kat.counter, kat.key);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out.w[i], kat.expected.w[i]) << "rounds " << Rounds << " word " << i;
}

TEST(Philox, Random123KnownAnswers10Rounds) {
  for (const Kat& kat : kKat10) expect_kat<10>(kat);
}

TEST(Philox, Random123KnownAnswers7Rounds) {
  for (const Kat& kat : kKat7) expect_kat<7>(kat);
}

// curand_init(seed, subsequence, offset): key = seed, counter high half =
// subsequence, low half = offset / 4, word offset % 4 of that block.
TEST(Philox, StreamAddressing) {
  const uint64_t seed = 0x0123456789abcdefull, sub = 0xfedcba9876543210ull;
  const Block counter = stream_counter(sub, 0x1111222233334444ull);
  EXPECT_EQ(counter.w[0], 0x33334444u);
  EXPECT_EQ(counter.w[1], 0x11112222u);
  EXPECT_EQ(counter.w[2], 0x76543210u);
  EXPECT_EQ(counter.w[3], 0xfedcba98u);
  const Key key = seed_key(seed);
  EXPECT_EQ(key.w[0], 0x89abcdefu);
  EXPECT_EQ(key.w[1], 0x01234567u);
  const uint64_t offset = 4 * 0x1111222233334444ull + 3;
  EXPECT_EQ(stream_word(seed, sub, offset), philox4x32(counter, key).w[3]);
}

// Ragged ranges, unaligned starts, and a low counter word that wraps
// (block 2^32 - 5 .. 2^32 + 10). The CPU backend's vector forms are checked
// against stream_word through its fills (tests/cpu/fill_test.cpp).
TEST(Philox, GenerateWordsGivesTheStreamWords) {
  struct Range {
    uint64_t first;
    size_t count;
  };
  const uint64_t wrap = (uint64_t{1} << 34) - 20;
  const Range ranges[] = {{0, 0},  {0, 1},   {3, 1},      {1, 2},        {2, 7},
                          {0, 64}, {5, 257}, {wrap, 130}, {wrap + 1, 77}};
  const uint64_t seeds[] = {0, 42, 0xffffffffffffffffull};
  const uint64_t subs[] = {0, 7, 0x8000000000000001ull};
  for (uint64_t seed : seeds) {
    for (uint64_t sub : subs) {
      for (const Range& range : ranges) {
        std::vector<uint32_t> out(range.count + 1, 0xdeadbeef);
        generate_words(seed, sub, range.first, out.data(), range.count);
        for (size_t i = 0; i < range.count; ++i) {
          ASSERT_EQ(out[i], stream_word(seed, sub, range.first + i))
              << "seed " << seed << " sub " << sub << " word " << range.first + i;
        }
        EXPECT_EQ(out[range.count], 0xdeadbeefu) << "wrote past the end";
      }
    }
  }
}

}  // namespace
}  // namespace reprise::rng
