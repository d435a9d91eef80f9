// Reductions on the GPU (cuda/kernels/reduce.h).
#include "cuda/backend.h"
#include "cuda/kernels/reduce.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_REDUCE_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
