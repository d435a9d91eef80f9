// moe_route on the GPU (cuda/kernels/moe_route.h).
#include "cuda/backend.h"
#include "cuda/kernels/moe_route.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/moe_route.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
