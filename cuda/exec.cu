// CudaExec's byte movement and sorting.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/device_memory.h"
#include "cuda/launch.cuh"
#include "cuda/pinned.h"

namespace reprise::cuda {

size_t CudaExec::max_shared_bytes() const { return properties(device_).sharedMemPerBlockOptin; }

void CudaExec::copy_bytes(void* dst, const void* src, size_t n) const {
  if (n == 0) return;
  const DeviceGuard guard(device_);
  check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync",
        device_);
}

void CudaExec::download(void* host_dst, const void* src, size_t n) const {
  PinnedStaging::of(device_).download(host_dst, src, n, stream_);
}

void CudaExec::sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const int64_t* values_in,
                          int64_t* values_out, int64_t n, int key_bits) const {
  if (n == 0) return;
  const DeviceGuard guard(device_);
  size_t bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, values_in, values_out, n,
                                        0, key_bits, stream_),
        "cub::DeviceRadixSort::SortPairs", device_);
  // Freed at once: a later allocation on this stream runs after the sort.
  DeviceMemory& memory = DeviceMemory::of(device_);
  void* temp = memory.allocate(bytes);
  const cudaError_t status = cub::DeviceRadixSort::SortPairs(
      temp, bytes, keys_in, keys_out, values_in, values_out, n, 0, key_bits, stream_);
  memory.release(temp);
  check(status, "cub::DeviceRadixSort::SortPairs", device_);
}

}  // namespace reprise::cuda
