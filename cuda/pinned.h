#pragma once
// Host transfers through pinned (page-locked) staging buffers. The DMA
// engine reads and writes pinned memory directly, where a pageable buffer
// goes through a driver copy first; and an upload returns as soon as its
// bytes are staged, so the host prepares the next batch while the copy runs.
//
// Two buffers of kChunk bytes per device, used in turn: a transfer goes in
// chunks, and the copy of one chunk overlaps the host's memcpy of the next.
// Each buffer's event tells when the device is done with it.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>

#include "engine/device.h"

namespace reprise::cuda {

class PinnedStaging {
 public:
  static constexpr size_t kChunk = size_t(4) << 20;

  static PinnedStaging& of(Device device);

  // host_src (pageable) -> dst on the device, ordered on `stream`; host_src
  // may be reused when this returns.
  void upload(void* dst, const void* host_src, size_t nbytes, cudaStream_t stream);
  // src on the device -> host_dst after the work issued on `stream`;
  // returns when the bytes are in host_dst.
  void download(void* host_dst, const void* src, size_t nbytes, cudaStream_t stream);

 private:
  explicit PinnedStaging(Device device);

  struct Buffer {
    unsigned char* data = nullptr;
    cudaEvent_t done = nullptr;  // recorded after the device's last use
  };

  Device device_;
  std::mutex mutex_;
  Buffer buffers_[2];
  int next_ = 0;
};

}  // namespace reprise::cuda
