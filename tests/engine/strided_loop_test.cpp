#include "engine/strided_loop.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace reprise {
namespace {

// Calls for_each_run over one operand and counts the visits of each element
// offset; also records the longest run and the threads that ran.
struct Visits {
  std::vector<int> count;
  int64_t longest = 0;
  std::set<std::thread::id> threads;
};

Visits visit(const Shape& shape, const Shape& strides, int64_t storage) {
  Visits v;
  v.count.assign(size_t(storage), 0);
  std::mutex m;
  for_each_run<1>(shape, {strides}, [&](auto off, int64_t n, auto st) {
    std::lock_guard<std::mutex> lock(m);
    v.longest = std::max(v.longest, n);
    v.threads.insert(std::this_thread::get_id());
    for (int64_t j = 0; j < n; ++j) ++v.count[size_t(off[0] + j * st[0])];
  });
  return v;
}

class StridedLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = threads::num_threads();
    threads::set_num_threads(2);
  }
  void TearDown() override { threads::set_num_threads(before_); }

 private:
  int before_ = 1;
};

TEST_F(StridedLoop, ContiguousTensorIsCutIntoPiecesAndVisitedOnce) {
  // (8, 256, 688) coalesces to one run of 1.4M elements.
  const Shape shape{8, 256, 688};
  const int64_t n = numel(shape);
  Visits v = visit(shape, contiguous_strides(shape), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v.count[size_t(i)], 1) << "element " << i;
  EXPECT_EQ(v.longest, kRunPiece);
  EXPECT_EQ(v.threads.size(), 2u) << "a single long run stayed on one thread";
}

TEST_F(StridedLoop, LongStridedRunsAreCutWithTheirStride) {
  // Every second column of a (3, 2 * 40000) buffer: 3 runs of 40000 at
  // stride 2, each cut into a full piece and a tail.
  const Shape shape{3, 40000};
  Visits v = visit(shape, {80000, 2}, 3 * 80000);
  for (int64_t i = 0; i < 3 * 80000; ++i) {
    ASSERT_EQ(v.count[size_t(i)], i % 2 == 0 ? 1 : 0) << "element " << i;
  }
  EXPECT_EQ(v.longest, kRunPiece);
}

TEST_F(StridedLoop, ShortRunsAreNotCut) {
  // Rows of 7 elements at stride 2, 16 apart: 1500 runs that do not merge.
  const Shape shape{300, 5, 7};
  Visits v = visit(shape, {80, 16, 2}, 300 * 80);
  for (int64_t i = 0; i < 300 * 80; ++i) {
    ASSERT_EQ(v.count[size_t(i)], i % 2 == 0 && i % 16 < 14 ? 1 : 0) << "element " << i;
  }
  EXPECT_EQ(v.longest, 7);
}

}  // namespace
}  // namespace reprise
