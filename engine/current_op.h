#pragma once
// The op the current thread is running, for errors raised below the op
// layer: an allocation that fails names the op that asked for it. autograd
// sets it around an op's forward (autograd/tape.cpp), its replay
// (autograd/checkpoint.cpp) and its backward rule (autograd/node.cpp); the
// cost is a thread-local pointer saved and restored per op.

#include <string>

namespace reprise {

class CurrentOpGuard {
 public:
  // `name` and `scope` must outlive the guard; `phase` is "forward",
  // "replay" or "backward".
  CurrentOpGuard(const char* name, const char* phase, const std::string& scope);
  ~CurrentOpGuard();
  CurrentOpGuard(const CurrentOpGuard&) = delete;
  CurrentOpGuard& operator=(const CurrentOpGuard&) = delete;

 private:
  friend std::string describe_current_op();
  const char* name_;
  const char* phase_;
  const std::string& scope_;
  const CurrentOpGuard* outer_;  // the op that runs this one (a backward rule's ops)
};

// "mul (forward) at layers.0.mlp, in silu (backward) at layers.0.mlp", or
// "no op (outside autograd, or on a worker thread)" when none runs.
std::string describe_current_op();

}  // namespace reprise
