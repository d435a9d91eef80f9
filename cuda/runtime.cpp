#include "cuda/runtime.h"

#include <map>
#include <memory>
#include <mutex>

#include "engine/error.h"

namespace reprise::cuda {

void check(cudaError_t status, const char* what, Device device) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // a failed call leaves its error for the next one to see
  REPRISE_FAIL(what, " on ", to_string(device), ": ", cudaGetErrorString(status));
}

DeviceGuard::DeviceGuard(Device device) : previous_(-1) {
  check(cudaGetDevice(&previous_), "cudaGetDevice", device);
  if (previous_ != device.index()) check(cudaSetDevice(device.index()), "cudaSetDevice", device);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

const cudaDeviceProp& properties(Device device) {
  static std::mutex mutex;
  static auto* cache = new std::map<int, std::unique_ptr<cudaDeviceProp>>;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*cache)[device.index()];
  if (!slot) {
    auto prop = std::make_unique<cudaDeviceProp>();
    check(cudaGetDeviceProperties(prop.get(), device.index()), "cudaGetDeviceProperties", device);
    slot = std::move(prop);
  }
  return *slot;
}

}  // namespace reprise::cuda
