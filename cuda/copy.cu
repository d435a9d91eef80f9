// Data movement on the GPU (cuda/kernels/copy.h).
#include "cuda/backend.h"
#include "cuda/kernels/copy.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_COPY_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
