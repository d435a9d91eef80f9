#pragma once
// Moving a model to a device: every parameter of a module tree, built on the
// CPU, is copied to `device` in place (each parameter keeps its tensor,
// whose storage changes, so optimizers and names built later see it there).
// Gradients and optimizer state are created on the parameters' device.

#include "engine/grad_mode.h"
#include "nn/module.h"

namespace reprise::nn {

inline void to_device(Module& module, Device device) {
  NoGradGuard no_grad;
  for (const NamedParameter& p : module.parameters()) {
    if (p.value.device() == device) continue;
    const Tensor moved = p.value.detach().contiguous().to(device);
    moved.storage()->set_kind(MemoryKind::parameter);
    p.value.impl()->storage = moved.storage();
    p.value.impl()->strides = moved.strides();
    p.value.impl()->offset = 0;
  }
}

}  // namespace reprise::nn
