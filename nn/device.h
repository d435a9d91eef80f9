#pragma once
// Moving a model to a device: every parameter and buffer of a module tree,
// built on the CPU, is copied to `device` in place (each keeps its tensor,
// whose storage changes, so optimizers and names built later see it there).
// Gradients and optimizer state are created on the parameters' device.

#include "engine/grad_mode.h"
#include "nn/module.h"

namespace reprise::nn {

inline void to_device(Module& module, Device device) {
  NoGradGuard no_grad;
  for (const auto& [name, t] : module.named_state()) {
    if (t.device() == device) continue;
    const Tensor moved = t.detach().contiguous().to(device);
    moved.storage()->set_kind(MemoryKind::parameter);
    t.impl()->storage = moved.storage();
    t.impl()->strides = moved.strides();
    t.impl()->offset = 0;
  }
}

}  // namespace reprise::nn
