#pragma once
// A Tracer times what autograd runs on one thread — each recorded op, each
// backward rule, each checkpoint region and each replay of one, with its
// scope path — and samples the device's live memory by kind after every
// span. It writes Chrome's Trace Event Format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: a flame chart of the step
// and a memory timeline beside it.
//
//   autograd::Tracer tracer;
//   {
//     autograd::TraceGuard on(tracer);  // this thread's ops are traced
//     autograd::backward(loss_of(model, batch));
//   }
//   tracer.write("step.json", "my_program");
//
// Spans nest: the ops a backward rule calls are children of its backward
// span, and the replay a backward rule triggers (by reading a dropped value)
// is a child of that rule. A span's category is "forward", "backward" or
// "replay", or what an enclosing span set (the trainer's "optimizer").
//
// When no tracer is installed each hook costs one branch on a thread-local
// pointer.

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/memory_stats.h"
#include "io/json.h"

namespace reprise::autograd {

class Tracer {
 public:
  // One timed piece of work, in microseconds from the tracer's creation.
  struct Span {
    const char* name;      // an op's registry name, or "checkpoint", "replay", ...
    std::string scope;     // "layers.3.attn"; "" at top level
    const char* category;  // "forward", "backward", "replay", ...
    double start_us;
    double duration_us;
  };
  // Live bytes of each MemoryKind (indexed by the kind) at one moment.
  struct MemorySample {
    double time_us;
    std::array<int64_t, kMemoryKindCount> live;
  };

  // Samples the memory of `device`.
  explicit Tracer(Device device = Device::cpu());

  // Spans in the order they ended (children before their parent).
  const std::vector<Span>& spans() const { return spans_; }
  // One sample when a guard installs the tracer, then one per ended span.
  const std::vector<MemorySample>& memory() const { return memory_; }

  // The trace as a Trace Event Format object: "M" events naming the process
  // and thread, an "X" event per span (scope in args) and a "C" event
  // "memory" per sample (bytes per kind in args).
  json::Value to_json(const std::string& process_name) const;
  // Writes to_json() to `path` atomically (a temporary file, then a rename).
  void write(const std::string& path, const std::string& process_name) const;

  // Appends a memory sample taken now.
  void sample_memory();

 private:
  friend class TraceSpan;
  double now_us() const;

  Device device_;
  std::chrono::steady_clock::time_point origin_;
  const char* category_ = "forward";  // of spans that do not name one
  std::vector<Span> spans_;
  std::vector<MemorySample> memory_;
};

namespace detail {
// The tracer of this thread; nullptr when tracing is off.
extern constinit thread_local Tracer* active_tracer;
}  // namespace detail

inline Tracer* active_tracer() { return detail::active_tracer; }

// Installs `tracer` on this thread while alive (nesting restores the
// previous one) and takes a first memory sample.
class TraceGuard {
 public:
  explicit TraceGuard(Tracer& tracer);
  ~TraceGuard();
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;

 private:
  Tracer* previous_;
};

// Times its own lifetime as a span of the thread's tracer, if one is
// installed; `category` (when given) also becomes the category of spans
// nested in it. Then takes a memory sample.
class TraceSpan {
 public:
  TraceSpan(const char* name, const std::string& scope, const char* category = nullptr) {
    if (Tracer* t = active_tracer()) [[unlikely]]
      begin(*t, name, scope, category);
  }
  ~TraceSpan() {
    if (tracer_) [[unlikely]]
      end();
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  void begin(Tracer& tracer, const char* name, const std::string& scope, const char* category);
  void end();

  Tracer* tracer_ = nullptr;
  const char* name_ = nullptr;
  std::string scope_;
  const char* category_ = nullptr;
  const char* enclosing_category_ = nullptr;
  double start_us_ = 0;
};

}  // namespace reprise::autograd
