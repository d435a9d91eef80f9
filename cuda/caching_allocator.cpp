#include "cuda/caching_allocator.h"

#include <algorithm>
#include <bit>

#include "base/error.h"

namespace reprise::cuda {
namespace {

constexpr size_t kMinBlock = 512;
constexpr size_t kSmallLimit = size_t(1) << 20;
constexpr size_t kLargeStep = size_t(2) << 20;

}  // namespace

CachingAllocator::~CachingAllocator() {
  // Blocks still handed out belong to tensors that outlive the allocator
  // (static destruction); only the cache goes back.
  empty_cache();
}

size_t CachingAllocator::size_class(size_t nbytes) {
  if (nbytes <= kMinBlock) return kMinBlock;
  if (nbytes > kSmallLimit) return (nbytes + kLargeStep - 1) / kLargeStep * kLargeStep;
  // (2^k, 2^(k+1)] in four steps of 2^(k-2).
  const size_t step = std::bit_floor(nbytes - 1) / 4;
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  const size_t size = size_class(nbytes);
  const std::lock_guard<std::mutex> lock(mutex_);
  collect_pending();
  if (void* p = take_cached(size, stream)) {
    ++stats_.cache_hits;
    stats_.in_use += int64_t(size);
    return p;
  }
  void* p = api_.malloc(size);
  if (p == nullptr && stats_.reserved > stats_.in_use) {
    ++stats_.oom_flushes;
    free_cached();
    p = api_.malloc(size);
  }
  if (p == nullptr) return nullptr;
  ++stats_.device_mallocs;
  blocks_.emplace(p, Block{.size = size, .stream = stream});
  count_reserved(int64_t(size));
  stats_.in_use += int64_t(size);
  return p;
}

void CachingAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = blocks_.find(ptr);
  REPRISE_CHECK(it != blocks_.end(), "CachingAllocator::release: ", ptr, " was not allocated here");
  Block& b = it->second;
  stats_.in_use -= int64_t(b.size);
  if (b.other_streams.empty()) {
    bins_[{b.stream, b.size}].push_back(ptr);
    return;
  }
  Pending p{.ptr = ptr};
  for (StreamId s : b.other_streams) p.events.push_back(api_.record_event(s));
  b.other_streams.clear();
  pending_.push_back(std::move(p));
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = blocks_.find(ptr);
  REPRISE_CHECK(it != blocks_.end(), "CachingAllocator::record_stream: ", ptr,
                " was not allocated here");
  Block& b = it->second;
  if (stream == b.stream) return;
  if (std::find(b.other_streams.begin(), b.other_streams.end(), stream) == b.other_streams.end())
    b.other_streams.push_back(stream);
}

void CachingAllocator::empty_cache() {
  const std::lock_guard<std::mutex> lock(mutex_);
  collect_pending();
  free_cached();
}

AllocatorStats CachingAllocator::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats s = stats_;
  s.cached = s.reserved - s.in_use;
  return s;
}

void* CachingAllocator::take_cached(size_t size, StreamId stream) {
  const auto it = bins_.find({stream, size});
  if (it == bins_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  return p;
}

// Moves released blocks whose streams have all passed their events into
// the bins of their own stream.
void CachingAllocator::collect_pending() {
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    const bool done = std::all_of(p.events.begin(), p.events.end(),
                                  [&](uint64_t e) { return api_.event_done(e); });
    if (!done) {
      still.push_back(std::move(p));
      continue;
    }
    for (uint64_t e : p.events) api_.release_event(e);
    const Block& b = blocks_.at(p.ptr);
    bins_[{b.stream, b.size}].push_back(p.ptr);
  }
  pending_ = std::move(still);
}

void CachingAllocator::free_cached() {
  for (auto& [key, bin] : bins_) {
    for (void* p : bin) {
      api_.free(p);
      ++stats_.device_frees;
      count_reserved(-int64_t(key.second));
      blocks_.erase(p);
    }
  }
  bins_.clear();
}

void CachingAllocator::count_reserved(int64_t delta) {
  stats_.reserved += delta;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

}  // namespace reprise::cuda
