// rotary on the GPU (cuda/kernels/rotary.h).
#include "cuda/backend.h"
#include "cuda/kernels/rotary.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensor CudaBackend::rotary(const Tensor& x, const Tensor& positions, double theta, int sign) {
  return cuda::rotary(exec_for(device()), x, positions, theta, sign);
}

}  // namespace reprise::cuda
