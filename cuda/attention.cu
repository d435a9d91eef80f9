// Attention on the GPU: our flash-style kernels (cuda/kernels/attention.h).
#include "cuda/backend.h"
#include "cuda/kernels/attention.h"
#include "cuda/launch.cuh"

namespace reprise::cuda {

Tensors CudaBackend::sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionParams& params) {
  return cuda::sdpa(exec_for(device()), q, k, v, params);
}

Tensors CudaBackend::sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& dout,
                                   const AttentionParams& params, bool need_dq, bool need_dk) {
  return cuda::sdpa_backward(exec_for(device()), q, k, v, out, lse, dout, params, need_dq, need_dk);
}

}  // namespace reprise::cuda
