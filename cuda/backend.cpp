// The CUDA backend's host side: memory, transfers, its name and figures,
// and one backend per device. Its kernels are defined in the .cu files.
#include "cuda/backend.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "base/error.h"
#include "cuda/device_memory.h"
#include "cuda/pinned.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"

namespace reprise {

namespace cuda {

CudaBackend::CudaBackend(int index) : Backend(Device::cuda(index)) {
  const int n = cuda_device_count();
  REPRISE_CHECK(index >= 0 && index < n, to_string(device()), ": only ", n,
                " CUDA device(s) present");
}

KernelSet CudaBackend::kernels() const { return all_kernels(); }

std::string CudaBackend::name() const {
  return to_string(device()) + " (" + properties(device()).name + ")";
}

void* CudaBackend::allocate(size_t nbytes) {
  return DeviceMemory::of(device()).try_allocate(nbytes);
}

void CudaBackend::release(void* ptr, size_t) { DeviceMemory::of(device()).release(ptr); }

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t nbytes) {
  PinnedStaging::of(device()).upload(dst, host_src, nbytes, current_stream(device()));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t nbytes) {
  PinnedStaging::of(device()).download(host_dst, src, nbytes, current_stream(device()));
}

void CudaBackend::synchronize() {
  const DeviceGuard guard(device());
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device());
}

DeviceMemoryInfo CudaBackend::memory_info() {
  const AllocatorStats s = DeviceMemory::of(device()).stats();
  const DeviceGuard guard(device());
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", device());
  return {.reserved = s.reserved,
          .peak_reserved = s.peak_reserved,
          .cached = s.cached,
          .capacity = int64_t(total_bytes),
          .device_free = int64_t(free_bytes)};
}

// SMs x lanes per SM x 2 (an FMA) x the SM clock. Lanes per SM: f32 128 on
// sm_90 and 64 on sm_80 (the CUDA guide's arithmetic throughput table),
// f64 64 on both (and 2 elsewhere: consumer parts). bf16 and f16 products
// with f32 accumulation run on tensor cores, dense: 1024 per SM on sm_80
// (A100: 312 TFLOP/s) and 2048 on sm_90 (H100/H200 SXM: 989 TFLOP/s);
// consumer parts accumulate in f32 at other rates, not given here.
double CudaBackend::peak_flops(DType dtype) {
  const cudaDeviceProp& p = properties(device());
  int clock_khz = 0;
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device().index()),
        "cudaDeviceGetAttribute", device());
  const bool datacenter = p.major == 8 ? p.minor == 0 : p.major == 9;
  double lanes = 0;
  if (dtype == DType::f32) lanes = p.major >= 9 || (p.major == 8 && p.minor != 0) ? 128 : 64;
  if (dtype == DType::f64) lanes = datacenter ? 64 : 2;
  if ((dtype == DType::bf16 || dtype == DType::f16) && datacenter)
    lanes = p.major == 9 ? 2048 : 1024;
  return double(p.multiProcessorCount) * lanes * 2.0 * double(clock_khz) * 1e3;
}

}  // namespace cuda

bool built_with_cuda() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

Backend& cuda_backend(int index) {
  // One per device, never destroyed: storage that outlives static
  // destruction still frees through it.
  static std::mutex mutex;
  static auto* backends = new std::map<int, cuda::CudaBackend*>;
  const std::lock_guard<std::mutex> lock(mutex);
  cuda::CudaBackend*& b = (*backends)[index];
  if (b == nullptr) b = new cuda::CudaBackend(index);
  return *b;
}

}  // namespace reprise
