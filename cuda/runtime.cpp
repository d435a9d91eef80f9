// The engine's CUDA runtime services, compiled into reprise_engine when the
// build has CUDA.
#include <cuda_runtime_api.h>

#include "engine/cuda_runtime.h"
#include "engine/device.h"
#include "engine/error.h"

namespace reprise {

bool built_with_cuda() { return true; }

namespace cuda_runtime {
namespace {
void check(cudaError_t status, const char* what, int device) {
  REPRISE_CHECK(status == cudaSuccess, what, " on cuda:", device, ": ", cudaGetErrorString(status));
}
}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

void* allocate(size_t nbytes, int device) {
  REPRISE_CHECK(device >= 0 && device < device_count(), "allocate on cuda:", device, ": only ",
                device_count(), " CUDA device(s) present");
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, nbytes), "cudaMalloc", device);
  return ptr;
}

void release(void* ptr, int device) {
  cudaSetDevice(device);
  cudaFree(ptr);
}

void copy(void* dst, const void* src, size_t nbytes, CopyKind kind, int device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  cudaMemcpyKind k = kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                     : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
  check(cudaMemcpy(dst, src, nbytes, k), "cudaMemcpy", device);
}

}  // namespace cuda_runtime
}  // namespace reprise
