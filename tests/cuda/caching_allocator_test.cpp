// The caching allocator's policy on a fake device: size classes, reuse per
// stream, blocks used on other streams held until their events pass, the
// cache given back when the device runs out, and the statistics.
#include "cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

namespace reprise::cuda {
namespace {

// A device with `capacity` bytes whose events pass when the test says so.
class FakeDevice : public DeviceMemoryApi {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}
  void* malloc(size_t n) override {
    if (used_ + n > capacity_) return nullptr;
    used_ += n;
    void* p = std::malloc(n);
    sizes_[p] = n;
    return p;
  }
  void free(void* p) override {
    used_ -= sizes_.at(p);
    sizes_.erase(p);
    std::free(p);
  }
  uint64_t record_event(StreamId stream) override {
    recorded_on.push_back(stream);
    pending.insert(next_);
    return next_++;
  }
  bool event_done(uint64_t e) override { return pending.count(e) == 0; }
  void release_event(uint64_t e) override { released.insert(e); }

  size_t used() const { return used_; }
  std::set<uint64_t> pending, released;
  std::vector<StreamId> recorded_on;

 private:
  size_t capacity_, used_ = 0;
  uint64_t next_ = 1;
  std::map<void*, size_t> sizes_;
};

constexpr StreamId kS1 = 1, kS2 = 2;

TEST(CachingAllocator, SizeClassesCoverTheRequestWithBoundedWaste) {
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 640u);  // (512, 1024] in steps of 128
  EXPECT_EQ(CachingAllocator::size_class(1024), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1025), 1280u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), size_t(1) << 20);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(CachingAllocator::size_class(5 << 20), size_t(6) << 20);
  for (size_t n = 1; n < (size_t(3) << 20); n = n * 3 / 2 + 7) {
    const size_t c = CachingAllocator::size_class(n);
    EXPECT_GE(c, n);
    if (n > 512 && n <= (1 << 20)) {
      EXPECT_LE(c, n + n / 4 + 1) << n;
    }
    EXPECT_EQ(CachingAllocator::size_class(c), c) << "a class is its own class: " << n;
  }
}

TEST(CachingAllocator, AFreedBlockIsReusedOnItsStreamOnly) {
  FakeDevice dev(1 << 30);
  CachingAllocator a(dev);
  void* p = a.allocate(1000, kS1);
  a.release(p);
  EXPECT_EQ(a.stats().cached, 1024);
  void* other = a.allocate(1000, kS2);  // another stream: a new block
  EXPECT_NE(other, p);
  void* again = a.allocate(900, kS1);  // same class, same stream: the cached one
  EXPECT_EQ(again, p);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.device_mallocs, 2);
  EXPECT_EQ(s.in_use, 2048);
  EXPECT_EQ(s.reserved, 2048);
  EXPECT_EQ(s.cached, 0);
  a.release(again);
  a.release(other);
}

TEST(CachingAllocator, ABlockUsedOnAnotherStreamWaitsForItsEvent) {
  FakeDevice dev(1 << 30);
  CachingAllocator a(dev);
  void* p = a.allocate(4096, kS1);
  a.record_stream(p, kS2);
  a.record_stream(p, kS1);  // its own stream: nothing to wait for
  a.release(p);
  ASSERT_EQ(dev.recorded_on, std::vector<StreamId>{kS2});
  void* q = a.allocate(4096, kS1);
  EXPECT_NE(q, p) << "reused before stream 2 passed its use";
  dev.pending.clear();  // stream 2 has passed the event
  a.release(q);
  void* r = a.allocate(4096, kS1);
  void* s = a.allocate(4096, kS1);
  EXPECT_TRUE((r == p && s == q) || (r == q && s == p));
  EXPECT_EQ(dev.released.size(), 1u);
  a.release(r);
  a.release(s);
}

TEST(CachingAllocator, TheCacheGoesBackToTheDeviceWhenItRunsOut) {
  FakeDevice dev(8 << 20);
  CachingAllocator a(dev);
  void* p = a.allocate(6 << 20, kS1);
  a.release(p);
  EXPECT_EQ(dev.used(), size_t(6) << 20);
  void* q = a.allocate(4 << 20, kS1);  // another class: only fits once the cache is freed
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(dev.used(), size_t(4) << 20);
  EXPECT_EQ(a.stats().oom_flushes, 1);
  EXPECT_EQ(a.allocate(6 << 20, kS1), nullptr) << "no room even without a cache";
  a.release(q);
  a.empty_cache();
  EXPECT_EQ(dev.used(), 0u);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.peak_reserved, 6 << 20);
  EXPECT_EQ(s.device_frees, 2);
}

TEST(CachingAllocator, EmptyCacheKeepsBlocksInUseAndWaiting) {
  FakeDevice dev(1 << 30);
  CachingAllocator a(dev);
  void* used = a.allocate(100, kS1);
  void* waiting = a.allocate(100, kS1);
  a.record_stream(waiting, kS2);
  a.release(waiting);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 1024);
  EXPECT_EQ(a.stats().in_use, 512);
  a.release(used);
  dev.pending.clear();  // the side stream passes its event
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 0);
  EXPECT_EQ(dev.used(), 0u);
}

}  // namespace
}  // namespace reprise::cuda
