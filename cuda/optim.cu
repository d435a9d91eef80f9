// Optimizer updates on the GPU (cuda/kernels/optim.h).
#include "cuda/backend.h"
#include "cuda/kernels/optim.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_OPTIM_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
