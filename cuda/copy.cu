// Data movement on the GPU (cuda/kernels/copy.h).
#include "cuda/backend.h"
#include "cuda/kernels/copy.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

void CudaBackend::fill(const Tensor& dst, double value) {
  cuda::fill(exec_for(device()), dst, value);
}

void CudaBackend::copy(const Tensor& dst, const Tensor& src) {
  cuda::copy(exec_for(device()), dst, src);
}

bool CudaBackend::representable(const Tensor& x, DType to) {
  return cuda::representable(exec_for(device()), x, to);
}

}  // namespace reprise::cuda
