// Elementwise kernels on the GPU (cuda/kernels/elementwise.h).
#include "cuda/backend.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/elementwise.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
