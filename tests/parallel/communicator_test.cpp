// The collectives at any rank count: values and bits (the sum in rank
// order), shapes, and the errors of mismatched sizes and missing ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "engine/accumulate.h"
#include "tests/parallel/test_world.h"
#include "tests/support/expect_error.h"

namespace reprise::parallel {
namespace {

using testing::world;

Communicator& comm() { return *world(); }

// Rank r's values: large and small magnitudes mixed, so that adding in
// another order gives other bits. n = 1001: chunks of unequal sizes.
Tensor values_of(int r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[size_t(i)] = float((r % 2 ? 1e7 : -3e-3) * (1 + double(i % 7)) + 0.1 * double(r * i % 13));
  }
  return Tensor::from_vector(v, {n});
}

TEST(Communicator, AllReduceIsTheSumInRankOrderBitForBit) {
  Communicator& c = comm();
  Tensor t = values_of(c.rank(), 1001);
  c.all_reduce(t);
  Tensor expected = values_of(0, 1001);
  for (int r = 1; r < c.size(); ++r) expected = sum_of(expected, values_of(r, 1001));
  EXPECT_EQ(t.to_vector<float>(), expected.to_vector<float>());
}

TEST(Communicator, AllReduceOfFewerElementsThanRanks) {
  Communicator& c = comm();
  Tensor t = Tensor::full({1}, double(c.rank() + 1));
  c.all_reduce(t);
  EXPECT_EQ(t.item<float>(), float(c.size() * (c.size() + 1) / 2));
}

TEST(Communicator, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  Communicator& c = comm();
  const int R = c.size();
  const Tensor full = values_of(c.rank(), R * 3 * 5).view({R * 3, 5});
  const Tensor mine = c.reduce_scatter(full);
  ASSERT_EQ(mine.shape(), (Shape{3, 5}));
  Tensor expected = values_of(0, R * 3 * 5).view({R * 3, 5});
  for (int r = 1; r < R; ++r) expected = sum_of(expected, values_of(r, R * 3 * 5).view({R * 3, 5}));
  EXPECT_EQ(mine.to_vector<float>(),
            expected.slice(0, c.rank() * 3, c.rank() * 3 + 3).to_vector<float>());
  if (R > 1) {
    testing::expect_error([&] { c.reduce_scatter(Tensor::zeros({R * 3 + 1})); },
                          {"reduce_scatter", "multiple of the"});
  }
}

TEST(Communicator, AllGatherStacksTheRanksInOrder) {
  Communicator& c = comm();
  const Tensor mine = Tensor::from_vector<int64_t>({c.rank(), 10 * c.rank()}, {2});
  const Tensor all = c.all_gather(mine);
  ASSERT_EQ(all.shape(), (Shape{c.size(), 2}));
  for (int r = 0; r < c.size(); ++r) {
    EXPECT_EQ(all.select(0, r).to_vector<int64_t>(), (std::vector<int64_t>{r, 10 * r}));
  }
}

TEST(Communicator, BroadcastCopiesTheRootsTensor) {
  Communicator& c = comm();
  const int root = c.size() - 1;
  Tensor t = values_of(c.rank(), 37);
  c.broadcast(t, root);
  EXPECT_EQ(t.to_vector<float>(), values_of(root, 37).to_vector<float>());
  testing::expect_error([&] { c.broadcast(t, c.size()); }, {"broadcast", "root"});
}

TEST(Communicator, AllToAllVMovesBlocksOfRowsBetweenRanks) {
  Communicator& c = comm();
  const int R = c.size(), me = c.rank();
  // Rank p sends rank q (p + q) % 3 rows of 4 values p * 100 + q (0 rows too).
  auto rows = [](int p, int q) { return int64_t((p + q) % 3); };
  std::vector<int64_t> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
  std::vector<float> data;
  for (int q = 0; q < R; ++q) {
    send[size_t(q)] = rows(me, q);
    recv[size_t(q)] = rows(q, me);
    for (int64_t i = 0; i < rows(me, q) * 4; ++i) data.push_back(float(me * 100 + q));
  }
  const Tensor out =
      c.all_to_all_v(Tensor::from_vector(data, {int64_t(data.size()) / 4, 4}), send, recv);
  std::vector<float> expected;
  for (int p = 0; p < R; ++p) {
    for (int64_t i = 0; i < rows(p, me) * 4; ++i) expected.push_back(float(p * 100 + me));
  }
  EXPECT_EQ(out.size(0), std::accumulate(recv.begin(), recv.end(), int64_t(0)));
  EXPECT_EQ(out.to_vector<float>(), expected);
  const int64_t sent = std::accumulate(send.begin(), send.end(), int64_t(0));
  testing::expect_error(
      [&] {
        c.all_to_all_v(Tensor::zeros({sent + 1, 4}), send, recv);
      },
      {"all_to_all_v", "send counts add up"});
}

TEST(Communicator, BarrierAndDuplicate) {
  Communicator& c = comm();
  c.barrier();
  const std::unique_ptr<Communicator> d = c.duplicate();
  EXPECT_EQ(d->rank(), c.rank());
  EXPECT_EQ(d->size(), c.size());
  Tensor t = Tensor::ones({3});
  d->all_reduce(t);
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(3, float(c.size())));
}

TEST(Communicator, RefusesTensorsOnAnotherDeviceOrNotContiguous) {
  Communicator& c = comm();
  Tensor strided = Tensor::zeros({4, 4}).transpose(0, 1);
  testing::expect_error([&] { c.all_reduce(strided); }, {"all_reduce", "contiguous"});
}

TEST(Communicator, DifferentSizesOnTheRanksAreAnErrorNamingTheRanks) {
  Communicator& c = comm();
  if (c.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  // On a communicator of its own: a failed one refuses further work.
  const std::unique_ptr<Communicator> d = c.duplicate();
  Tensor t = Tensor::ones({c.rank() == 0 ? 1000 : 800});
  const std::string message = testing::error_of([&] { d->all_reduce(t); });
  EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
  EXPECT_NE(message.find("on rank " + std::to_string(c.rank())), std::string::npos) << message;
  EXPECT_NE(message.find("different sizes"), std::string::npos) << message;
  testing::expect_error([&] { d->barrier(); }, {"failed earlier", "different sizes"});
}

TEST(Communicator, AMissingRankIsATimeoutErrorNamingIt) {
  Communicator& c = comm();
  if (c.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::unique_ptr<Communicator> d = c.duplicate();
  d->set_timeout(1.0);
  // The last rank never joins this all_reduce; a small tensor, so that the
  // others' messages to it are buffered and nothing waits on them.
  if (c.rank() != c.size() - 1) {
    Tensor t = Tensor::ones({4});
    const auto start = std::chrono::steady_clock::now();
    testing::expect_error(
        [&] { d->all_reduce(t); },
        {"all_reduce", "timed out after 1 s", "no data from rank " + std::to_string(c.size() - 1)});
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 10.0);
  }
  c.barrier();
}

}  // namespace
}  // namespace reprise::parallel
