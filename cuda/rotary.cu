// rotary on the GPU (cuda/kernels/rotary.h).
#include "cuda/backend.h"
#include "cuda/kernels/rotary.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_ROTARY_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
