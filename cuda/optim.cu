// Optimizer updates on the GPU (cuda/kernels/optim.h).
#include "cuda/backend.h"
#include "cuda/kernels/optim.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

void CudaBackend::adamw_step(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v,
                             const AdamWStep& step) {
  cuda::adamw_step(exec_for(device()), w, g, m, v, step);
}

void CudaBackend::sgd_step(const Tensor& w, const Tensor& g, const Tensor& buf,
                           const SgdStep& step) {
  cuda::sgd_step(exec_for(device()), w, g, buf, step);
}

void CudaBackend::scale_(const Tensor& t, double s) { cuda::scale_(exec_for(device()), t, s); }

}  // namespace reprise::cuda
