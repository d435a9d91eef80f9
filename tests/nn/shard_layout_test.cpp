// The flat shard layout: buckets as plain data parallelism cuts them, and
// blocks that cover every element of every parameter exactly once, on
// aligned boundaries.
#include "nn/shard_layout.h"

#include <gtest/gtest.h>

#include "tests/support/expect_error.h"

namespace reprise::nn {
namespace {

std::vector<NamedParameter> params_of(const std::vector<int64_t>& sizes) {
  std::vector<NamedParameter> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string name = "p";  // (not "p" + ...: GCC 12's -Wrestrict misfires on it)
    name += std::to_string(i);
    out.push_back({name, Tensor::zeros({sizes[i]}).requires_grad(true)});
  }
  return out;
}

TEST(ShardLayout, UnsplitBucketsAreTightAndInReverseOrder) {
  // 40-byte buckets: p3 (12 elements, 48 bytes) alone, then p2 + p1 (8 + 4
  // elements reach 48 bytes), then p0.
  const ShardLayout layout = ShardLayout::build(params_of({5, 4, 8, 12}), 40, 1, 1);
  ASSERT_EQ(layout.buckets.size(), size_t(3));
  EXPECT_EQ(layout.buckets[0].params, (std::vector<size_t>{3}));
  EXPECT_EQ(layout.buckets[1].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(layout.buckets[1].offset, (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(layout.buckets[1].block, 12);
  EXPECT_EQ(layout.buckets[2].params, (std::vector<size_t>{0}));
  EXPECT_EQ(layout.pieces(0).size(), size_t(4));
}

TEST(ShardLayout, EveryElementIsInOneRanksBlockOnAlignedBoundaries) {
  const std::vector<int64_t> sizes{37, 1, 64, 19, 8, 100};
  for (const int ranks : {1, 2, 3, 4}) {
    for (const int64_t align : {1, 8}) {
      const ShardLayout layout = ShardLayout::build(params_of(sizes), 256, ranks, align);
      std::vector<std::vector<int>> owner(sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i) owner[i].assign(size_t(sizes[i]), -1);
      for (int r = 0; r < ranks; ++r) {
        for (const ShardLayout::Piece& p : layout.pieces(r)) {
          const ShardLayout::Bucket& b = layout.buckets[p.bucket];
          EXPECT_EQ(p.begin % align, 0) << "piece of p" << p.param;
          EXPECT_LE(p.at + p.size(), b.block);
          for (int64_t e = p.begin; e < p.end; ++e) {
            EXPECT_EQ(owner[p.param][size_t(e)], -1) << "p" << p.param << "[" << e << "] twice";
            owner[p.param][size_t(e)] = r;
          }
        }
      }
      for (size_t i = 0; i < sizes.size(); ++i) {
        for (const int r : owner[i]) EXPECT_GE(r, 0) << "an element of p" << i << " unowned";
      }
      for (const ShardLayout::Bucket& b : layout.buckets) {
        EXPECT_EQ(b.block % align, 0);
        for (const int64_t o : b.offset) EXPECT_EQ(o % align, 0);
      }
    }
  }
}

TEST(ShardLayout, RefusesBadSizesAndRanks) {
  testing::expect_error([] { ShardLayout::build(params_of({4}), 0, 1, 1); },
                        {"ShardLayout", "bucket_bytes 0", ">= 1"});
  const ShardLayout layout = ShardLayout::build(params_of({4}), 64, 2, 1);
  testing::expect_error([&] { layout.pieces(2); }, {"ShardLayout", "rank 2", "[0, 2)"});
}

}  // namespace
}  // namespace reprise::nn
