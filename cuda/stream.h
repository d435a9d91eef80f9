#pragma once
// Streams and events. Every kernel and copy reprise issues on a device goes
// to that device's current stream: its own non-blocking stream, created on
// first use, unless a StreamGuard on this thread names another. Work on one
// stream runs in issue order, which is what lets the caching allocator hand
// a freed block to the next allocation on the same stream at once
// (cuda/caching_allocator.h).

#include <cuda_runtime_api.h>

#include <optional>

#include "engine/device.h"

namespace reprise::cuda {

// An owned stream that does not synchronise with the legacy default stream.
class Stream {
 public:
  explicit Stream(Device device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  cudaStream_t get() const { return stream_; }
  // Waits until everything issued on the stream has run.
  void synchronize() const;
  // Later work on this stream waits for everything issued so far on `other`.
  void wait(cudaStream_t other) const;

 private:
  Device device_;
  cudaStream_t stream_;
};

// The stream reprise's work on `device` goes to from this thread.
cudaStream_t current_stream(Device device);

// Makes `stream` the current stream of its device on this thread for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  std::optional<cudaStream_t> previous_;  // an outer guard's
};

// An owned event without timing (cheap to record and query), or with it
// for measuring (elapsed_ms).
class Event {
 public:
  explicit Event(Device device, bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(cudaStream_t stream);
  bool done() const;  // the stream has passed the record
  void synchronize() const;
  // Milliseconds from `start`'s record to this one's (both timing events).
  float elapsed_ms(const Event& start) const;
  cudaEvent_t get() const { return event_; }

 private:
  Device device_;
  cudaEvent_t event_;
};

}  // namespace reprise::cuda
