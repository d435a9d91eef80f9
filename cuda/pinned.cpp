#include "cuda/pinned.h"

#include <algorithm>
#include <cstring>

#include "cuda/runtime.h"

namespace reprise::cuda {

PinnedStaging::PinnedStaging(Device device) : device_(device) {
  const DeviceGuard guard(device);
  for (Buffer& b : buffers_) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, kChunk, cudaHostAllocDefault), "cudaHostAlloc", device);
    b.data = static_cast<unsigned char*>(p);
    check(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate", device);
    check(cudaEventRecord(b.done, nullptr), "cudaEventRecord", device);
  }
}

PinnedStaging& PinnedStaging::of(Device device) {
  // Pinned memory goes back at exit.
  return one_per_device<PinnedStaging>(device, [](Device d) { return new PinnedStaging(d); });
}

void PinnedStaging::upload(void* dst, const void* host_src, size_t nbytes, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard guard(device_);
  const auto* src = static_cast<const unsigned char*>(host_src);
  for (size_t done = 0; done < nbytes; done += kChunk) {
    const size_t n = std::min(kChunk, nbytes - done);
    Buffer& b = buffers_[next_];
    next_ = 1 - next_;
    check(cudaEventSynchronize(b.done), "cudaEventSynchronize", device_);
    std::memcpy(b.data, src + done, n);
    check(cudaMemcpyAsync(static_cast<unsigned char*>(dst) + done, b.data, n,
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync", device_);
    check(cudaEventRecord(b.done, stream), "cudaEventRecord", device_);
  }
}

void PinnedStaging::download(void* host_dst, const void* src, size_t nbytes, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard guard(device_);
  auto* dst = static_cast<unsigned char*>(host_dst);
  // Chunk i's copy is issued before chunk i - 1 is copied out on the host.
  auto issue = [&](size_t at) {
    Buffer& b = buffers_[(at / kChunk) % 2];
    check(cudaEventSynchronize(b.done), "cudaEventSynchronize", device_);
    check(cudaMemcpyAsync(b.data, static_cast<const unsigned char*>(src) + at,
                          std::min(kChunk, nbytes - at), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync", device_);
    check(cudaEventRecord(b.done, stream), "cudaEventRecord", device_);
  };
  if (nbytes > 0) issue(0);
  for (size_t at = 0; at < nbytes; at += kChunk) {
    if (at + kChunk < nbytes) issue(at + kChunk);
    Buffer& b = buffers_[(at / kChunk) % 2];
    check(cudaEventSynchronize(b.done), "cudaEventSynchronize", device_);
    std::memcpy(dst + at, b.data, std::min(kChunk, nbytes - at));
  }
}

}  // namespace reprise::cuda
