#pragma once
// Whether ops record onto the tape. Thread-local; NoGradGuard disables
// recording for a scope (optimizer updates, evaluation, kernels).

namespace reprise {

class GradMode {
 public:
  static bool enabled();
  static void set_enabled(bool on);
};

class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace reprise
