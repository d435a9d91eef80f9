// Row kernels on the GPU: softmax, cross_entropy and the norms
// (cuda/kernels/softmax.h, loss.h, norm.h).
#include "cuda/backend.h"
#include "cuda/kernels/loss.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/softmax.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

#define REPRISE_KERNEL REPRISE_CUDA_FORWARD
#define REPRISE_OWN_KERNEL(...)
#include "engine/kernels/rows.def"
#undef REPRISE_OWN_KERNEL
#undef REPRISE_KERNEL

}  // namespace reprise::cuda
