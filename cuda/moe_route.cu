// moe_route on the GPU (cuda/kernels/moe_route.h).
#include "cuda/backend.h"
#include "cuda/kernels/moe_route.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_MOE_ROUTE_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
