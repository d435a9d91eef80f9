#pragma once
// Device memory of one GPU: the caching allocator (cuda/caching_allocator.h)
// over cudaMalloc, cudaFree and CUDA events, allocating for the device's
// current stream. Running out in allocate() (workspaces) raises
// OutOfMemoryError (engine/memory_limit.h) naming the op, the bytes asked
// for, what the live tensors hold by kind, what the cache holds and what the
// device reports free; tensors' storage uses try_allocate(), and Storage
// raises the same Error, with the tensor's shape.

#include <cstddef>

#include "cuda/caching_allocator.h"
#include "engine/device.h"

namespace reprise::cuda {

class DeviceMemory {
 public:
  static DeviceMemory& of(Device device);

  void* allocate(size_t nbytes);
  // allocate(), but nullptr when the device has no room.
  void* try_allocate(size_t nbytes);
  void release(void* ptr);
  // ptr (from allocate) is also used on `stream` (see CachingAllocator).
  void record_stream(void* ptr, StreamId stream) { allocator_.record_stream(ptr, stream); }
  void empty_cache() { allocator_.empty_cache(); }
  AllocatorStats stats() const { return allocator_.stats(); }

 private:
  explicit DeviceMemory(Device device);
  class Api;

  Device device_;
  Api* api_;  // never destroyed, like the allocator that uses it
  CachingAllocator allocator_;
};

}  // namespace reprise::cuda
