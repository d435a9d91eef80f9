// Reductions on the GPU (cuda/kernels/reduce.h).
#include "cuda/backend.h"
#include "cuda/kernels/reduce.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/reduce.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
