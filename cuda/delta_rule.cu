// The gated delta rule on the GPU (cuda/kernels/delta_rule.h).
#include "cuda/backend.h"
#include "cuda/kernels/delta_rule.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/delta_rule.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
