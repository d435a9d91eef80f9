#pragma once
// SwiGLU, the gated MLP activation of Llama and Mixtral: silu(gate) * up,
// as one op. Against ops::mul(ops::silu(gate), up) it makes one pass instead
// of two forward and three backward, saves only gate and up (not silu(gate)
// too), and replays as one node under checkpointing. Its values and
// gradients are bitwise those of the two-op form.

#include "engine/tensor.h"

namespace reprise::ops {

// gate, up: same shape, f32 or f64 -> silu(gate) * up, that shape.
Tensor swiglu(const Tensor& gate, const Tensor& up);

}  // namespace reprise::ops
