// The CUDA backend: device memory and host transfers. Kernels a device
// lacks raise Backend's "no kernel" Error naming the op and the device.
#include "engine/backend.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "engine/error.h"

namespace reprise {
namespace {

void check(cudaError_t status, const char* what, Device d) {
  REPRISE_CHECK(status == cudaSuccess, what, " on ", to_string(d), ": ",
                cudaGetErrorString(status));
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index) : Backend(Device::cuda(index)) {
    const int n = cuda_device_count();
    REPRISE_CHECK(index >= 0 && index < n, to_string(device()), ": only ", n,
                  " CUDA device(s) present");
  }

  std::string name() const override {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device().index()) != cudaSuccess) return to_string(device());
    return to_string(device()) + " (" + prop.name + ")";
  }

  void* allocate(size_t nbytes) override {
    check(cudaSetDevice(device().index()), "cudaSetDevice", device());
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, nbytes), "cudaMalloc", device());
    return ptr;
  }
  void release(void* ptr, size_t) override {
    cudaSetDevice(device().index());
    cudaFree(ptr);
  }
  void copy_from_host(void* dst, const void* host_src, size_t nbytes) override {
    check(cudaSetDevice(device().index()), "cudaSetDevice", device());
    check(cudaMemcpy(dst, host_src, nbytes, cudaMemcpyHostToDevice), "cudaMemcpy", device());
  }
  void copy_to_host(void* host_dst, const void* src, size_t nbytes) override {
    check(cudaSetDevice(device().index()), "cudaSetDevice", device());
    check(cudaMemcpy(host_dst, src, nbytes, cudaMemcpyDeviceToHost), "cudaMemcpy", device());
  }
};

}  // namespace

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
  static auto* backends = new std::map<int, CudaBackend*>;
  const std::lock_guard<std::mutex> lock(mutex);
  CudaBackend*& b = (*backends)[index];
  if (b == nullptr) b = new CudaBackend(index);
  return *b;
}

}  // namespace reprise
