#pragma once
// The CUDA runtime as the backend uses it: errors become reprise::Error
// naming the call and the device, and a guard makes a device current for a
// scope (the runtime's current device is per host thread).

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

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

// The one T of `device`: made by make(device) (a new T) on first use, under
// a lock, and never destroyed, since work may still be queued on the
// device, or storage freed through it, when static destructors run.
template <class T, class Make>
T& one_per_device(Device device, Make make) {
  static std::mutex mutex;
  static auto* all = new std::map<int, T*>;
  const std::lock_guard<std::mutex> lock(mutex);
  T*& one = (*all)[device.index()];
  if (one == nullptr) one = make(device);
  return *one;
}

}  // namespace reprise::cuda
