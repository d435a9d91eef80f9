// Tensor layout, copies, dtypes and memory accounting.
#include "engine/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/memory_stats.h"
#include "tests/support/expect_error.h"

namespace reprise {
namespace {

TEST(DType, Bfloat16RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(bfloat16(1.0f + 0x1.0p-8f).bits, 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(bfloat16(1.0f + 3 * 0x1.0p-8f).bits, 0x3f82);
  EXPECT_EQ(float(bfloat16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float(bfloat16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
}

TEST(DType, Float16RoundsToNearestEvenIncludingSubnormals) {
  EXPECT_EQ(float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(float16(65504.0f).bits, 0x7bff);           // largest finite
  EXPECT_EQ(float16(65520.0f).bits, 0x7c00);           // rounds to infinity
  EXPECT_EQ(float16(0x1.0p-24f).bits, 0x0001);         // smallest subnormal
  EXPECT_EQ(float16(0x1.0p-25f).bits, 0x0000);         // tie at half of it: to even (0)
  EXPECT_EQ(float16(0x1.8p-24f).bits, 0x0002);         // 1.5 ulp: tie to even (2)
  EXPECT_EQ(float16(1.0f + 0x1.0p-11f).bits, 0x3c00);  // tie between 1 and 1 + 2^-10
  for (uint32_t b = 0; b < 0x7c00; ++b) {              // every finite half round-trips
    float16 h = float16::from_bits(uint16_t(b));
    ASSERT_EQ(float16(float(h)).bits, b) << b;
  }
  EXPECT_TRUE(std::isnan(float(float16(std::nanf("")))));
}

// Copies of transposes (the CPU copies them in 16 x 16 tiles): sizes that
// are not multiples of the tile, outer dims, a dtype conversion, and a
// slice, each against the element-by-element definition.
TEST(Tensor, ContiguousCopiesOfTransposesAreElementwise) {
  const Tensor x = Tensor::arange(3 * 37 * 50, DType::f32).view({3, 37, 50});
  const std::vector<float> v = x.to_vector<float>();
  const Tensor t = x.transpose(1, 2).contiguous();  // (3, 50, 37)
  const std::vector<float> got = t.to_vector<float>();
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t i = 0; i < 50; ++i) {
      for (int64_t j = 0; j < 37; ++j) {
        ASSERT_EQ(got[size_t((a * 50 + i) * 37 + j)], v[size_t((a * 37 + j) * 50 + i)]);
      }
    }
  }
  const std::vector<double> as_f64 = x.transpose(1, 2).to(DType::f64).to_vector<double>();
  for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(as_f64[k], double(got[k]));
  // Columns 3..42 of each matrix, transposed: a source with an offset.
  const Tensor s = x.slice(2, 3, 43).transpose(1, 2).contiguous();  // (3, 40, 37)
  const std::vector<float> sliced = s.to_vector<float>();
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t i = 0; i < 40; ++i) {
      for (int64_t j = 0; j < 37; ++j) {
        ASSERT_EQ(sliced[size_t((a * 40 + i) * 37 + j)], v[size_t((a * 37 + j) * 50 + i + 3)]);
      }
    }
  }
}

TEST(Tensor, LayoutViewsShareStorageWithoutCopies) {
  Tensor t = Tensor::arange(24, DType::f32).view({2, 3, 4});
  Tensor tr = t.transpose(0, 2);  // (4, 3, 2)
  EXPECT_EQ(tr.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(tr.storage(), t.storage());
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.contiguous().to_vector<float>()[1], 12.f);

  Tensor s = t.slice(2, 1, 4, 2);  // elements 1 and 3 of the last dim
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.to_vector<float>()[0], 1.f);
  EXPECT_EQ(s.to_vector<float>()[1], 3.f);

  Tensor e = Tensor::arange(3, DType::f32).view({3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.to_vector<float>()[5], 1.f);

  EXPECT_EQ(t.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(t.select(1, 2).to_vector<float>()[0], 8.f);
  EXPECT_EQ(t.view({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_THROW(tr.view({24}), Error);       // not viewable: needs a copy
  EXPECT_EQ(tr.reshape({24}).numel(), 24);  // reshape copies instead
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(t.expand({2, 3, 5}), Error);
  EXPECT_THROW(t.as_strided({2, 3, 5}, {15, 5, 1}, 0), Error);  // past the storage
}

TEST(Tensor, CopyBroadcastsAndConverts) {
  Tensor dst = Tensor::zeros({2, 3}, DType::f64);
  dst.copy_(Tensor::from_vector<int64_t>({1, 2, 3}, {3}));
  EXPECT_EQ(dst.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor half = dst.to(DType::bf16);
  EXPECT_EQ(half.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  uint64_t v = dst.version();
  dst.fill_(7);
  EXPECT_GT(dst.version(), v);
}

TEST(Tensor, CudaWithoutCudaIsAClearError) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA";
  try {
    Tensor::zeros({2}, DType::f32, Device::cuda(0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  }
}

TEST(MemoryStats, TracksLivePeakAndKinds) {
  MemorySnapshot before = memory_stats::snapshot();
  {
    Tensor a = Tensor::empty({1024}, DType::f32);  // 4096 bytes
    MemorySnapshot during = memory_stats::snapshot();
    EXPECT_EQ(during[MemoryKind::temporary].live - before[MemoryKind::temporary].live, 4096);
    a.storage()->set_kind(MemoryKind::parameter);
    MemorySnapshot tagged = memory_stats::snapshot();
    EXPECT_EQ(tagged[MemoryKind::parameter].live - before[MemoryKind::parameter].live, 4096);
    EXPECT_EQ(tagged[MemoryKind::temporary].live, before[MemoryKind::temporary].live);
    Tensor t = Tensor::empty({256}, DType::f32);
    t.storage()->retain_saved();  // what the tape does when it saves a temporary
    EXPECT_EQ(memory_stats::snapshot()[MemoryKind::saved_activation].live -
                  before[MemoryKind::saved_activation].live,
              1024);
    t.storage()->release_saved();
  }
  MemorySnapshot after = memory_stats::snapshot();
  EXPECT_EQ(after.total.live, before.total.live);
  EXPECT_GE(after.total.peak, before.total.live + 4096);
}

// A storage can give its memory back while its tensors live on (split
// parameters between gathers): the memory leaves the accounting, reading a
// tensor of it is an Error, and reload() brings it back with the version
// unchanged. Memory wrapped from elsewhere cannot be evicted.
TEST(Storage, EvictedMemoryLeavesTheAccountingAndCannotBeRead) {
  Tensor w = Tensor::full({256}, 2.0);  // 1024 bytes
  w.storage()->set_kind(MemoryKind::parameter);
  const uint64_t version = w.storage()->version();
  const int64_t before = memory_stats::snapshot()[MemoryKind::parameter].live;
  w.storage()->evict();
  EXPECT_FALSE(w.storage()->resident());
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::parameter].live, before - 1024);
  testing::expect_error([&] { w.to_vector<float>(); }, {"f32[256]", "was given back"});
  w.storage()->evict();  // already: nothing
  w.storage()->reload();
  EXPECT_TRUE(w.storage()->resident());
  EXPECT_EQ(memory_stats::snapshot()[MemoryKind::parameter].live, before);
  EXPECT_EQ(w.storage()->version(), version);
  w.fill_(3.0);
  EXPECT_EQ(w.to_vector<float>()[255], 3.0f);

  float outside[4] = {1, 2, 3, 4};
  const auto wrapped = Storage::wrap(outside, sizeof outside, Device::cpu(), [] {});
  testing::expect_error([&] { wrapped->evict(); }, {"Storage::evict", "wrapped"});
}

}  // namespace
}  // namespace reprise
