// Indexing kernels on the GPU (cuda/kernels/indexing.h).
#include "cuda/backend.h"
#include "cuda/kernels/indexing.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_INDEXING_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
