#include "cuda/stream.h"

#include <map>
#include <mutex>

#include "base/error.h"
#include "cuda/runtime.h"

namespace reprise::cuda {
namespace {

// A StreamGuard's stream per device index, on this thread.
thread_local std::map<int, cudaStream_t> guarded;

}  // namespace

Stream::Stream(Device device) : device_(device), stream_(nullptr) {
  const DeviceGuard guard(device);
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", device);
}

Stream::~Stream() {
  const DeviceGuard guard(device_);
  cudaStreamDestroy(stream_);
}

void Stream::synchronize() const {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
}

void Stream::wait(cudaStream_t other) const {
  const DeviceGuard guard(device_);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", device_);
  check(cudaEventRecord(e, other), "cudaEventRecord", device_);
  check(cudaStreamWaitEvent(stream_, e, 0), "cudaStreamWaitEvent", device_);
  cudaEventDestroy(e);  // released once the wait has been enqueued
}

cudaStream_t current_stream(Device device) {
  const auto it = guarded.find(device.index());
  if (it != guarded.end()) return it->second;
  // One per device, never destroyed: kernels may be queued on it until exit.
  static std::mutex mutex;
  static auto* own = new std::map<int, Stream*>;
  const std::lock_guard<std::mutex> lock(mutex);
  Stream*& s = (*own)[device.index()];
  if (s == nullptr) s = new Stream(device);
  return s->get();
}

StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device().index()) {
  const auto it = guarded.find(device_);
  if (it != guarded.end()) previous_ = it->second;
  guarded[device_] = stream.get();
}

StreamGuard::~StreamGuard() {
  if (previous_) {
    guarded[device_] = *previous_;
  } else {
    guarded.erase(device_);
  }
}

Event::Event(Device device, bool timing) : device_(device), event_(nullptr) {
  const DeviceGuard guard(device);
  check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreate", device);
}

Event::~Event() { cudaEventDestroy(event_); }

void Event::record(cudaStream_t stream) {
  check(cudaEventRecord(event_, stream), "cudaEventRecord", device_);
}

bool Event::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check(status, "cudaEventQuery", device_);
  return true;
}

void Event::synchronize() const {
  check(cudaEventSynchronize(event_), "cudaEventSynchronize", device_);
}

float Event::elapsed_ms(const Event& start) const {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.event_, event_), "cudaEventElapsedTime", device_);
  return ms;
}

}  // namespace reprise::cuda
