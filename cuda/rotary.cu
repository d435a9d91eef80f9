// rotary on the GPU (cuda/kernels/rotary.h).
#include "cuda/backend.h"
#include "cuda/kernels/rotary.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensor CudaBackend::rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                           double scaling, int sign) {
  return cuda::rotary(exec_for(device()), x, positions, inv_freq, scaling, sign);
}

}  // namespace reprise::cuda
