#pragma once
// A caching allocator for device memory. cudaMalloc and cudaFree are slow
// and cudaFree synchronises the device, and a training step frees and
// reallocates the same sizes every step (a checkpoint replay reallocates
// what the forward dropped), so freed blocks are kept in bins by size class
// and handed to the next request of that class.
//
// Reuse is stream-aware: a block belongs to the stream it was allocated
// for, and a freed block is reused at once only by requests on that stream,
// whose later work runs after the work that used it. A block also used on
// other streams (record_stream) waits, after its release, until an event
// recorded on each of them then has passed.
//
// The policy is plain C++ over DeviceMemoryApi, so it runs and is tested
// without a device (tests/cuda/caching_allocator_test.cpp); the CUDA backend
// binds it to cudaMalloc, cudaFree and CUDA events (cuda/device_memory.cpp).
// Live bytes by kind are counted by Storage (engine/memory_stats.h); the
// allocator counts what it holds from the device.

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace reprise::cuda {

// A stream as the allocator sees it (a cudaStream_t's value).
using StreamId = uintptr_t;

// What the allocator asks of a device.
class DeviceMemoryApi {
 public:
  virtual ~DeviceMemoryApi() = default;
  // nbytes of device memory, or nullptr when the device has no room.
  virtual void* malloc(size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  // An event recorded now on `stream`; event_done tells whether the stream
  // has passed it; release_event gives it back.
  virtual uint64_t record_event(StreamId stream) = 0;
  virtual bool event_done(uint64_t event) = 0;
  virtual void release_event(uint64_t event) = 0;
};

struct AllocatorStats {
  int64_t reserved = 0;       // bytes held from the device (in use and cached)
  int64_t peak_reserved = 0;  // the most `reserved` has been
  int64_t in_use = 0;         // bytes of blocks handed out (size classes, not requests)
  int64_t cached = 0;         // reserved - in_use: free blocks kept for reuse
  int64_t device_mallocs = 0;
  int64_t device_frees = 0;
  int64_t cache_hits = 0;   // requests served from the cache
  int64_t oom_flushes = 0;  // times the cache was emptied to retry a failed malloc
};

class CachingAllocator {
 public:
  explicit CachingAllocator(DeviceMemoryApi& api) : api_(api) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The bytes of the class a request of nbytes gets: at least 512, then
  // four classes per power of two up to 1 MiB (at most 25% more than
  // asked), multiples of 2 MiB above (layers repeat the same large sizes).
  static size_t size_class(size_t nbytes);

  // A block of size_class(nbytes) for `stream`: a cached one of that class
  // when there is one, else a new one from the device; when the device has
  // no room, the cache is given back to it and the malloc tried again.
  // nullptr when that fails too (the caller raises, naming what is held).
  void* allocate(size_t nbytes, StreamId stream);
  void release(void* ptr);
  // ptr is used on `stream` besides its own: after its release it is not
  // reused before `stream` has passed that point.
  void record_stream(void* ptr, StreamId stream);
  // Gives every cached block back to the device (blocks still waiting on
  // other streams stay).
  void empty_cache();
  AllocatorStats stats() const;

 private:
  struct Block {
    size_t size;
    StreamId stream;
    std::vector<StreamId> other_streams;  // record_stream's
  };
  struct Pending {  // released, waiting for events on other streams
    void* ptr;
    std::vector<uint64_t> events;
  };
  using Bin = std::vector<void*>;

  void* take_cached(size_t size, StreamId stream);
  void collect_pending();
  void free_cached();
  void count_reserved(int64_t delta);

  DeviceMemoryApi& api_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;          // every block held, by address
  std::map<std::pair<StreamId, size_t>, Bin> bins_;  // free blocks by (stream, class)
  std::vector<Pending> pending_;
  AllocatorStats stats_;
};

}  // namespace reprise::cuda
