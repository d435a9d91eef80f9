#include "autograd/tracer.h"

#include <cmath>

#include "io/write_file.h"

namespace reprise::autograd {

namespace detail {
constinit thread_local Tracer* active_tracer = nullptr;
}  // namespace detail

Tracer::Tracer(Device device) : device_(device), origin_(std::chrono::steady_clock::now()) {}

double Tracer::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
      .count();
}

void Tracer::sample_memory() {
  const MemorySnapshot snap = memory_stats::snapshot(device_);
  MemorySample sample{.time_us = now_us(), .live = {}};
  for (size_t k = 0; k < kMemoryKindCount; ++k) sample.live[k] = snap.by_kind[k].live;
  memory_.push_back(sample);
}

namespace {
// Microseconds to the nanosecond, which the clock resolves: shorter JSON.
double round_to_ns(double us) { return std::round(us * 1e3) / 1e3; }
}  // namespace

json::Value Tracer::to_json(const std::string& process_name) const {
  // Everything runs on one thread of one process: pid 1, tid 1.
  auto metadata = [](const char* what, const std::string& name) {
    return json::Value(json::Object{{"name", what},
                                    {"ph", "M"},
                                    {"pid", 1},
                                    {"tid", 1},
                                    {"args", json::Object{{"name", name}}}});
  };
  json::Array events{metadata("process_name", process_name),
                     metadata("thread_name", "autograd (" + to_string(device_) + ")")};
  for (const Span& s : spans_) {
    events.push_back(json::Object{{"name", s.name},
                                  {"cat", s.category},
                                  {"ph", "X"},
                                  {"ts", round_to_ns(s.start_us)},
                                  {"dur", round_to_ns(s.duration_us)},
                                  {"pid", 1},
                                  {"tid", 1},
                                  {"args", json::Object{{"scope", s.scope}}}});
  }
  for (const MemorySample& m : memory_) {
    json::Object bytes;
    for (size_t k = 0; k < kMemoryKindCount; ++k)
      bytes.emplace_back(memory_kind_name(MemoryKind(k)), m.live[k]);
    events.push_back(json::Object{{"name", "memory"},
                                  {"ph", "C"},
                                  {"ts", round_to_ns(m.time_us)},
                                  {"pid", 1},
                                  {"args", bytes}});
  }
  return json::Object{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void Tracer::write(const std::string& path, const std::string& process_name) const {
  io::write_text_atomic(path, json::dump(to_json(process_name)) + "\n");
}

TraceGuard::TraceGuard(Tracer& tracer) : previous_(detail::active_tracer) {
  detail::active_tracer = &tracer;
  tracer.sample_memory();
}

TraceGuard::~TraceGuard() { detail::active_tracer = previous_; }

void TraceSpan::begin(Tracer& tracer, const char* name, const std::string& scope,
                      const char* category) {
  tracer_ = &tracer;
  name_ = name;
  scope_ = scope;
  enclosing_category_ = tracer.category_;
  category_ = category ? category : tracer.category_;
  tracer.category_ = category_;
  start_us_ = tracer.now_us();
}

void TraceSpan::end() {
  const double end_us = tracer_->now_us();
  tracer_->spans_.push_back({.name = name_,
                             .scope = std::move(scope_),
                             .category = category_,
                             .start_us = start_us_,
                             .duration_us = end_us - start_us_});
  tracer_->category_ = enclosing_category_;
  tracer_->sample_memory();
}

}  // namespace reprise::autograd
