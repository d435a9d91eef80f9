// Generator: named streams as monotone counters, block-aligned reservations,
// replay of a reservation after the stream moved on, and exact state
// save/restore.
#include "rng/generator.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "engine/backend.h"
#include "ops/random.h"
#include "rng/distributions.h"

namespace reprise::rng {
namespace {

TEST(Generator, ReservationsAreConsecutiveWholeBlocks) {
  Generator gen(7);
  const Reservation a = gen.reserve("default", 10);
  const Reservation b = gen.reserve("default", 1);
  const Reservation c = gen.reserve("default", 0);
  const Reservation d = gen.reserve("default", 8);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.count, 12u);
  EXPECT_EQ(b.offset, 12u);
  EXPECT_EQ(b.count, 4u);
  EXPECT_EQ(c.offset, 16u);
  EXPECT_EQ(c.count, 0u);
  EXPECT_EQ(d.offset, 16u);
  EXPECT_EQ(d.count, 8u);
  EXPECT_EQ(gen.offset("default"), 24u);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(a.subsequence, 0u);
}

// A slice of samples reads the words the whole batch gives those samples,
// and the stream moves as for the whole batch: a sample's random numbers do
// not depend on how the batch is split over processes or micro-batches.
TEST(Generator, SampleSliceCutsTheWholeBatchsReservation) {
  Generator whole(7), part(7);
  whole.reserve("dropout", 4);  // so the batch starts mid-stream
  part.reserve("dropout", 4);
  const Reservation all = whole.reserve("dropout", 6 * 5);  // 6 samples of 5 words
  Reservation slice;
  {
    const SampleSliceGuard guard(part, {.first = 2, .count = 3, .total = 6});
    slice = part.reserve("dropout", 3 * 5);
    EXPECT_THROW(part.reserve("dropout", 7), Error);  // not 3 equal parts
  }
  EXPECT_FALSE(part.sample_slice().has_value());
  EXPECT_EQ(slice.offset, all.offset + 2 * 5);
  EXPECT_EQ(slice.count, 15u);
  EXPECT_EQ(part.offset("dropout"), whole.offset("dropout"));
  // The whole batch as one slice changes nothing.
  Generator one(7);
  one.reserve("dropout", 4);
  one.set_sample_slice(SampleSlice{.first = 0, .count = 6, .total = 6});
  EXPECT_EQ(one.reserve("dropout", 30), all);
  EXPECT_THROW(one.set_sample_slice(SampleSlice{.first = 5, .count = 2, .total = 6}), Error);
}

TEST(Generator, StreamsAreIndependentCounters) {
  Generator gen(7);
  const Reservation d0 = gen.reserve("default", 100);
  const Reservation x0 = gen.reserve("dropout", 50);
  const Reservation d1 = gen.reserve("default", 4);
  EXPECT_EQ(x0.offset, 0u);
  EXPECT_EQ(d1.offset, 100u);
  EXPECT_EQ(d0.stream, 0u);
  EXPECT_EQ(x0.stream, 1u);
  EXPECT_EQ(x0.subsequence, Generator::subsequence_of("dropout"));
  EXPECT_NE(x0.subsequence, d0.subsequence);
  EXPECT_EQ(gen.offset("never used"), 0u);
}

// The subsequence depends on the name only, so first-use order changes ids
// but never words.
TEST(Generator, SubsequenceIsAFunctionOfTheName) {
  Generator a(1), b(1);
  a.reserve("dropout", 4);
  const Reservation ra = a.reserve("init", 4);
  const Reservation rb = b.reserve("init", 4);
  EXPECT_EQ(ra.subsequence, rb.subsequence);
  EXPECT_EQ(ra.offset, rb.offset);
  EXPECT_NE(ra.stream, rb.stream);
  EXPECT_EQ(Generator::subsequence_of("default"), 0u);
  EXPECT_NE(Generator::subsequence_of("dropout.rank0"), Generator::subsequence_of("dropout.rank1"));
}

TEST(Generator, ReplayAfterTheStreamAdvanced) {
  Generator gen(2026);
  const int64_t n = 5000;
  const Reservation r = gen.reserve("dropout", bernoulli_words(n));
  const Tensor x = Tensor::ones({n});
  auto dropout = [&](const Reservation& words) {
    return cpu_backend().dropout(x, 0.5, words).to_vector<float>();
  };
  const std::vector<float> first = dropout(r);
  // Other ops advance the stream...
  const std::vector<float> other = dropout(gen.reserve("dropout", bernoulli_words(n)));
  gen.reserve("default", 12345);
  // ...and the recorded reservation still reproduces the first output.
  EXPECT_EQ(dropout(r), first);
  EXPECT_NE(first, other);
}

TEST(Generator, StateRestoresBitExactly) {
  Generator gen(99);
  gen.reserve("default", 37);
  gen.reserve("dropout", 1000);
  gen.reserve("dropout.rank3", 5);
  const GeneratorState saved = gen.state();
  const std::vector<uint8_t> bytes = saved.to_bytes();

  const int64_t n = 777;
  auto draw = [n](Generator& g) {
    const std::vector<float> a = ops::randn({n}, g, "default").to_vector<float>();
    const std::vector<float> b = ops::dropout(Tensor::ones({n}), 0.2, g).to_vector<float>();
    return std::make_pair(a, b);
  };
  const auto expected = draw(gen);

  Generator resumed(0);
  resumed.reserve("something else", 4);
  resumed.set_state(GeneratorState::from_bytes(bytes.data(), bytes.size()));
  EXPECT_EQ(resumed.state(), saved);
  EXPECT_EQ(draw(resumed), expected);
  EXPECT_EQ(resumed.state(), gen.state());
}

TEST(Generator, FromBytesRejectsMalformedInput) {
  Generator gen(5);
  gen.reserve("dropout", 8);
  const std::vector<uint8_t> bytes = gen.state().to_bytes();
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_THROW(GeneratorState::from_bytes(bytes.data(), cut), Error) << "cut at " << cut;
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(GeneratorState::from_bytes(longer.data(), longer.size()), Error);
  std::vector<uint8_t> bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_THROW(GeneratorState::from_bytes(bad_magic.data(), bad_magic.size()), Error);
}

TEST(Generator, SetStateValidates) {
  Generator gen(1);
  EXPECT_THROW(gen.set_state({1, {{"default", 6}}}), Error);      // not block-aligned
  EXPECT_THROW(gen.set_state({1, {{"a", 0}, {"a", 4}}}), Error);  // duplicate name
  EXPECT_THROW(gen.set_state({1, {{"", 0}}}), Error);             // empty name
  EXPECT_THROW(gen.reserve("", 4), Error);
  EXPECT_NO_THROW(gen.set_state({3, {{"default", 8}, {"dropout", 4}}}));
  EXPECT_EQ(gen.seed(), 3u);
  EXPECT_EQ(gen.offset("default"), 8u);
}

TEST(Generator, ManualSeedRestarts) {
  Generator gen(1);
  gen.reserve("default", 40);
  gen.manual_seed(2);
  const Reservation r = gen.reserve("default", 4);
  EXPECT_EQ(r.seed, 2u);
  EXPECT_EQ(r.offset, 0u);
}

TEST(Generator, ExhaustedStreamThrows) {
  Generator gen(1);
  gen.set_state({1, {{"default", ~uint64_t{0} - 7}}});
  EXPECT_NO_THROW(gen.reserve("default", 4));
  EXPECT_THROW(gen.reserve("default", 4), Error);
  EXPECT_THROW(gen.reserve("dropout", ~uint64_t{0}), Error);
}

}  // namespace
}  // namespace reprise::rng
