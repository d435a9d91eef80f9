// Row kernels on the GPU: softmax, cross_entropy and the norms
// (cuda/kernels/softmax.h, loss.h, norm.h).
#include "cuda/backend.h"
#include "cuda/kernels/loss.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/softmax.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

REPRISE_CUDA_ROWS_KERNELS(REPRISE_CUDA_FORWARD)

}  // namespace reprise::cuda
