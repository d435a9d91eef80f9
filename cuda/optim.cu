// Optimizer updates on the GPU (cuda/kernels/optim.h).
#include "cuda/backend.h"
#include "cuda/kernels/optim.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/optim.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
