#pragma once
// The tape is the recording side of autograd: record() runs an op's forward
// and, when any input requires grad and grad mode is on, appends a Node to
// the graph. TapeObservers (checkpoint regions, the verifier) see every node
// recorded on their thread while they are installed.

#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/node.h"

namespace reprise::autograd {

// Which inputs and outputs the backward rule reads.
struct SaveSpec {
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;  // may name auxiliary outputs
};

struct OpCall {
  const OpInfo& op;
  Tensors inputs;
  Node::ForwardFn forward;
  Node::BackwardFn backward;
  SaveSpec save;
  // Outputs past this count are auxiliary: kept for backward, not returned.
  // -1: all outputs are public.
  int num_public_outputs = -1;
  std::optional<rng::Reservation> rng;
};

// Runs call.forward with grad mode off; records a Node when any input
// requires grad and grad mode is on. Returns the public outputs, which carry
// the node as grad_fn when one was recorded.
Tensors record(OpCall call);

// record() for a single-output op.
Tensor record_one(OpCall call);

class TapeObserver {
 public:
  virtual ~TapeObserver() = default;
  // Called after `node` is recorded with the concrete inputs and all outputs.
  virtual void on_record(const std::shared_ptr<Node>& node, const Tensors& inputs,
                         const Tensors& outputs) = 0;
};

// Installs an observer for the current thread while alive (nesting allowed;
// innermost first).
class ObserveTape {
 public:
  explicit ObserveTape(TapeObserver& observer);
  ~ObserveTape();
  ObserveTape(const ObserveTape&) = delete;
  ObserveTape& operator=(const ObserveTape&) = delete;

 private:
  TapeObserver* observer_;
};

}  // namespace reprise::autograd
