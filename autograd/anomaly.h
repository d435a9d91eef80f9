#pragma once
// Anomaly detection, as torch.autograd.detect_anomaly: while it is on,
// every recorded op's outputs are checked in forward, and every backward
// node's input gradients after its rule runs; the first NaN or infinity
// raises an Error naming the op, its scope and the shapes involved. Off by
// default, and then it costs one relaxed load per recorded op and per
// backward node. Process-wide, since a training step's ops may record on
// several threads.

#include <string>

#include "autograd/node.h"

namespace reprise::autograd {

// "NaN" or "inf" for the first non-finite element of `t`; nullptr when all
// are finite or `t` holds no floating values.
const char* first_non_finite(const Tensor& t);

bool detect_anomaly_enabled();
void set_detect_anomaly(bool on);

// Turns anomaly detection on while alive, and restores the previous setting.
class DetectAnomaly {
 public:
  DetectAnomaly();
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  bool previous_;
};

// Raises an Error when a floating tensor of the recorded `node`'s `outputs`
// holds a NaN or an infinity: "anomaly: log at layers.0 produced NaN in
// forward: output 0 f32[3] cpu from inputs f32[3] cpu". Every recorded op is
// checked, so the first to raise is the first that made the value from
// finite inputs, unless the value came from a leaf or an unrecorded op.
void check_forward_outputs(const Node& node, const Tensors& outputs);

// The same for the gradients `grads` (one per input) that `node`'s backward
// rule returned.
void check_backward_grads(const Node& node, const Tensors& grads);

}  // namespace reprise::autograd
