// Elementwise kernels on the GPU (cuda/kernels/elementwise.h).
#include "cuda/backend.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_ELEMENTWISE_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
