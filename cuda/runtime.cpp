#include "cuda/runtime.h"

#include <memory>

#include "base/error.h"

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
  return one_per_device<cudaDeviceProp>(device, [](Device d) {
    auto prop = std::make_unique<cudaDeviceProp>();
    check(cudaGetDeviceProperties(prop.get(), d.index()), "cudaGetDeviceProperties", d);
    return prop.release();
  });
}

}  // namespace reprise::cuda
