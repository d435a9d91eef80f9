#pragma once
// The CUDA runtime as the backend uses it: errors become reprise::Error
// naming the call and the device, and a guard makes a device current for a
// scope (the runtime's current device is per host thread).

#include <cuda_runtime_api.h>

#include "engine/device.h"

namespace reprise::cuda {

// Raises an Error "<what> on cuda:i: <CUDA's message>" unless status is
// cudaSuccess (the runtime's sticky error state is cleared first).
void check(cudaError_t status, const char* what, Device device);

// Makes `device` current for this thread until the guard goes away.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// The device's properties, read once.
const cudaDeviceProp& properties(Device device);

}  // namespace reprise::cuda
