#include "cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "engine/memory_limit.h"

namespace reprise::cuda {

// The allocator's view of one device. Events are recycled through a free
// list: creating one per released block would cost more than the block.
class DeviceMemory::Api final : public DeviceMemoryApi {
 public:
  explicit Api(Device device) : device_(device) {}

  void* malloc(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    check(status, "cudaMalloc", device_);
    return p;
  }
  void free(void* ptr) override { check(cudaFree(ptr), "cudaFree", device_); }

  uint64_t record_event(StreamId stream) override {
    cudaEvent_t e = nullptr;
    if (spare_.empty()) {
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", device_);
    } else {
      e = spare_.back();
      spare_.pop_back();
    }
    check(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)), "cudaEventRecord", device_);
    return reinterpret_cast<uint64_t>(e);
  }
  bool event_done(uint64_t event) override {
    const cudaError_t status = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    check(status, "cudaEventQuery", device_);
    return true;
  }
  void release_event(uint64_t event) override {
    spare_.push_back(reinterpret_cast<cudaEvent_t>(event));
  }

 private:
  Device device_;
  std::vector<cudaEvent_t> spare_;
};

DeviceMemory::DeviceMemory(Device device)
    : device_(device), api_(new Api(device)), allocator_(*api_) {}

DeviceMemory& DeviceMemory::of(Device device) {
  // Storage that outlives static destruction still frees through it.
  return one_per_device<DeviceMemory>(device, [](Device d) { return new DeviceMemory(d); });
}

void* DeviceMemory::try_allocate(size_t nbytes) {
  const DeviceGuard guard(device_);
  const StreamId stream = reinterpret_cast<StreamId>(current_stream(device_));
  return allocator_.allocate(nbytes, stream);
}

void* DeviceMemory::allocate(size_t nbytes) {
  if (void* p = try_allocate(nbytes)) return p;
  memory_limit::raise_out_of_memory(nbytes, device_, 0);
}

void DeviceMemory::release(void* ptr) {
  const DeviceGuard guard(device_);
  allocator_.release(ptr);
}

}  // namespace reprise::cuda
